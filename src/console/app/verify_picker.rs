//! The verify dialog: `v` on a Cooldowns row (clear after a probe) or on a Circuits row
//! (reset the breaker after a probe) opens a confirm dialog naming the model the probe will
//! ask for; `m` cycles through the models this provider serves (those its requests used
//! lately, then those its combo targets name); `y` sends the probe through
//! `Control::verify`, `n` cancels.

use super::{Action, App, Confirm};
use crate::core::operator::verify::VerifyTarget;
use crate::snapshot::Snapshot;

/// The model of a target label `provider[:connection]/model` when it is `provider`'s.
fn model_of<'a>(label: &'a str, provider: &str) -> Option<&'a str> {
    let (head, model) = label.split_once('/')?;
    let p = head.split_once(':').map_or(head, |(p, _)| p);
    (p == provider && !model.is_empty()).then_some(model)
}

/// The models a probe of `provider` can name, most recently used first, each once.
pub fn models_for(snapshot: &Snapshot, provider: &str) -> Vec<String> {
    let recent = snapshot.recent.iter().map(|r| r.target.as_str());
    let combos = snapshot
        .combos
        .iter()
        .flat_map(|c| c.targets.iter().map(String::as_str));
    let mut out: Vec<String> = Vec::new();
    for m in recent.chain(combos).filter_map(|l| model_of(l, provider)) {
        if !out.iter().any(|x| x == m) {
            out.push(m.to_owned());
        }
    }
    out
}

fn prompt(target: &VerifyTarget, model: &str) -> String {
    match target {
        VerifyTarget::Connection(c) => {
            format!("Probe '{c}' with {model} (1 token), clear it if it answers? (m model)")
        }
        VerifyTarget::Breaker(p) => format!(
            "Probe provider '{p}' with {model} (1 token), reset its breaker if it answers? (m model)"
        ),
    }
}

impl App {
    /// `v` on the Cooldowns panel: verify-and-clear the selected connection.
    pub(super) fn open_verify_clear(&mut self) -> Option<Action> {
        let Some((p, c)) = self.selected_connection() else {
            self.flash("no connection selected");
            return None;
        };
        if c.auth == "passthrough" {
            let text = format!(
                "'{}' forwards each client's own key (passthrough): sluice has no key to probe it with; c clears it",
                c.id
            );
            self.flash(text);
            return None;
        }
        let (pid, target) = (p.id.clone(), VerifyTarget::Connection(c.id.clone()));
        self.open_verify(&pid, target)
    }

    /// `v` on the Circuits panel: verify-and-reset the selected provider's breaker.
    pub(super) fn open_verify_reset(&mut self) -> Option<Action> {
        let Some(p) = self.snapshot.providers.get(self.circuit_selected) else {
            self.flash("no provider selected");
            return None;
        };
        let pid = p.id.clone();
        self.open_verify(&pid, VerifyTarget::Breaker(pid.clone()))
    }

    fn open_verify(&mut self, provider: &str, target: VerifyTarget) -> Option<Action> {
        let Some(model) = models_for(&self.snapshot, provider).into_iter().next() else {
            self.flash(format!(
                "no model known for provider '{provider}' (no combo target or recent request names one); verify through the admin API with \"verify\": \"<model>\""
            ));
            return None;
        };
        let text = prompt(&target, &model);
        self.gate(Action::Verify { target, model }, Some(text))
    }

    /// Moves the open verify dialog to the provider's next model (other dialogs ignore it).
    pub(super) fn cycle_verify_model(&mut self) {
        let Some(Confirm {
            prompt: text,
            action: Action::Verify { target, model },
        }) = self.confirm.as_mut()
        else {
            return;
        };
        let provider = match target {
            VerifyTarget::Breaker(p) => p.clone(),
            VerifyTarget::Connection(c) => {
                let Some(p) = self
                    .snapshot
                    .providers
                    .iter()
                    .find(|p| p.connections.iter().any(|x| &x.id == c))
                else {
                    return;
                };
                p.id.clone()
            }
        };
        let models = models_for(&self.snapshot, &provider);
        let i = models.iter().position(|m| m == model).map_or(0, |i| i + 1);
        if let Some(next) = models.get(i % models.len().max(1)) {
            model.clone_from(next);
        }
        *text = prompt(target, model);
    }
}

#[cfg(test)]
mod tests {
    use super::model_of;

    #[test]
    fn target_labels_name_their_provider_and_model() {
        assert_eq!(
            model_of("anthropic/claude-haiku", "anthropic"),
            Some("claude-haiku")
        );
        assert_eq!(
            model_of("anthropic:k2/claude-haiku", "anthropic"),
            Some("claude-haiku")
        );
        assert_eq!(model_of("or/meta/llama-3", "or"), Some("meta/llama-3"));
        assert_eq!(model_of("openrouter/x", "anthropic"), None);
        assert_eq!(model_of("anthropic/", "anthropic"), None);
        assert_eq!(model_of("", "anthropic"), None);
    }
}

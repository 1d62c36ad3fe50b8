//! The request path's two translation seams (see `docs/TRANSLATION.md`): which targets need
//! translation, the upstream request for them, and their answer on its way back.
//!
//! `dispatch` calls [`prepare`] before admitting a candidate (an untranslatable request is
//! decided before anything is sent and never becomes an attempt), but never for a candidate
//! whose admission queue is already full (`max_queue_depth`); `attempt.rs` sends the
//! prepared body to [`Seam::path`], translates a non-2xx body with [`Seam::error_body`]
//! *after* it was classified by the provider's own rules, a complete 2xx body with
//! [`Seam::complete_body`], and wraps a stream in [`UpstreamBody`] so the hold, the guards
//! and the relay see the client's format.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, header};
use http_body::{Body, Frame};
use hyper::body::Incoming;

use crate::config::{Dialect, ModelOptions, Provider};
use crate::metrics::BodyRewrite;
use crate::proxy::dialect::ProxyError;
use crate::proxy::request::body::{rewrite_model, splice_model};
use crate::proxy::route::{Route, RouteKind};
use crate::translate::{
    self, ClientFormat, ResponseContext, StreamTranslator, TargetOptions, TranslateError,
};

/// The Anthropic API version sent to an Anthropic provider for a translated OpenAI client.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The client format of `route` (`/v1/models` and count_tokens by their dialect).
pub fn client_format(route: Route) -> ClientFormat {
    match (route.kind, route.dialect) {
        (RouteKind::Responses, _) => ClientFormat::Responses,
        (_, Dialect::Anthropic) => ClientFormat::Anthropic,
        (_, Dialect::OpenAi) => ClientFormat::Chat,
    }
}

/// The dialect a request of `client` format is translated into for `p`, or `None` when `p`
/// speaks the client's format (Anthropic → `anthropic`, Chat → `openai`, Responses → an
/// `openai` provider with `responses = true`).
pub fn upstream_dialect(client: ClientFormat, p: &Provider) -> Option<Dialect> {
    match (client, p.dialect) {
        (ClientFormat::Anthropic, Dialect::Anthropic) | (ClientFormat::Chat, Dialect::OpenAi) => {
            None
        }
        (ClientFormat::Responses, Dialect::OpenAi) if p.translation.responses => None,
        (_, d) => Some(d),
    }
}

/// The [`TargetOptions`] for `model` on `p`: the provider's translation keys with the
/// model's `[providers.model_options]` entry laid over them.
pub fn target_options(p: &Provider, model: &str) -> TargetOptions {
    let t = &p.translation;
    let m = model_options(&t.model_options, model)
        .cloned()
        .unwrap_or_default();
    TargetOptions {
        drop_fields: t.drop_fields.clone(),
        default_max_tokens: t.default_max_tokens,
        reasoning_effort: m.reasoning_effort.unwrap_or(t.reasoning_effort),
        max_reasoning_effort: m.max_reasoning_effort.unwrap_or(t.max_reasoning_effort),
        max_output_tokens: m.max_output_tokens.or(t.max_output_tokens),
        max_completion_tokens: m.max_completion_tokens.unwrap_or(t.max_completion_tokens),
        system_role: t.system_role,
    }
}

/// The `[providers.model_options]` entry for `model`: the one named exactly `model`, else the
/// longest `*` pattern that matches it; `None` when none does.
pub fn model_options<'a>(
    entries: &'a [(String, ModelOptions)],
    model: &str,
) -> Option<&'a ModelOptions> {
    entries
        .iter()
        .filter(|(p, _)| crate::policy::lockout::glob_match(p, model))
        .max_by_key(|(p, _)| (p == model, p.len()))
        .map(|(_, o)| o)
}

/// `anthropic→openai`: the label an attempt's `translated` field shows.
pub fn label(client: ClientFormat, upstream: Dialect) -> String {
    format!("{}→{}", client.as_str(), upstream.as_str())
}

/// One translated attempt's context: what to translate back into.
#[derive(Debug, Clone)]
pub struct Seam {
    /// The upstream's dialect.
    pub upstream: Dialect,
    /// The request's reply context (client format, model, thinking, …).
    pub context: ResponseContext,
    /// What translation changed in what this target is asked (see
    /// [`crate::translate::TranslatedRequest::adjusted`]).
    pub adjusted: Vec<String>,
    /// What the client asked for that is served otherwise (see
    /// [`crate::translate::TranslatedRequest::downgrades`]); each becomes one
    /// [`WARNING_HEADER`] on the client's response.
    pub downgrades: Vec<String>,
}

/// The response header that tells the client what a translated request did not honour,
/// e.g. `x-sluice-warning: background ignored: served synchronously`; one per downgrade.
pub const WARNING_HEADER: &str = "x-sluice-warning";

impl Seam {
    /// Adds one [`WARNING_HEADER`] per downgrade to the client's response headers `h`.
    pub fn warn_client(&self, h: &mut HeaderMap) {
        for d in &self.downgrades {
            if let Ok(v) = HeaderValue::from_str(d) {
                h.append(HeaderName::from_static(WARNING_HEADER), v);
            }
        }
    }

    /// The upstream route path for this dialect.
    pub fn path(&self) -> &'static str {
        match self.upstream {
            Dialect::Anthropic => "/v1/messages",
            Dialect::OpenAi => "/v1/chat/completions",
        }
    }

    /// `anthropic→openai`.
    pub fn label(&self) -> String {
        label(self.context.client, self.upstream)
    }

    /// An upstream error body (already classified) in the client's format.
    pub fn error_body(&self, status: u16, body: &[u8]) -> Bytes {
        translate::translate_error(self.upstream, self.context.client, status, body)
    }

    /// A complete 2xx body in the client's format.
    ///
    /// # Errors
    /// The reply is not what the upstream's dialect promises.
    pub fn complete_body(&self, body: &[u8]) -> Result<Bytes, TranslateError> {
        translate::translate_response(self.upstream, body, &self.context)
    }

    /// The stream translator for one attempt (`None` only if no translation is needed).
    pub fn stream(&self) -> Option<StreamTranslator> {
        StreamTranslator::new(self.upstream, &self.context).ok()
    }

    /// Adapts the forwarded client headers to the upstream's dialect: a passed-through
    /// credential moves to the upstream's header (`x-api-key` ↔ `Authorization: Bearer`),
    /// Anthropic-only headers are removed for an OpenAI upstream, and an Anthropic upstream
    /// gets `anthropic-version` when the client sent none.
    pub fn adapt_headers(&self, h: &mut HeaderMap) {
        match self.upstream {
            Dialect::OpenAi => {
                if let Some(key) = h.remove("x-api-key")
                    && !h.contains_key(header::AUTHORIZATION)
                    && let Ok(mut v) =
                        HeaderValue::from_str(&format!("Bearer {}", key.to_str().unwrap_or("")))
                {
                    v.set_sensitive(true);
                    h.insert(header::AUTHORIZATION, v);
                }
                h.remove("anthropic-version");
                h.remove("anthropic-beta");
            }
            Dialect::Anthropic => {
                let bearer = h
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .and_then(|k| HeaderValue::from_str(k.trim()).ok());
                if let Some(mut v) = bearer
                    && !h.contains_key("x-api-key")
                {
                    v.set_sensitive(true);
                    h.remove(header::AUTHORIZATION);
                    h.insert(HeaderName::from_static("x-api-key"), v);
                }
                if !h.contains_key("anthropic-version") {
                    h.insert(
                        HeaderName::from_static("anthropic-version"),
                        HeaderValue::from_static(ANTHROPIC_VERSION),
                    );
                }
            }
        }
    }
}

/// The body to send to one target, and its seam when it is translated.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The upstream body.
    pub body: Bytes,
    /// Set when the target speaks another format than the client.
    pub seam: Option<Seam>,
    /// What was done to the client's body to make `body`; `None` when it is sent as is.
    pub rewrite: Option<BodyRewrite>,
}

/// The body for `model` on `p`: the client's body (its `model` rewritten when `rewrite`), or
/// its translation when `p` speaks another format. `model_at` is where the probe found the
/// client's `model` value in `body` (the rewrite then splices instead of parsing again).
/// `created` is the wall clock in Unix seconds (for OpenAI replies' `created`).
///
/// # Errors
/// [`ProxyError::Untranslatable`] naming the field; [`ProxyError::BadRequest`] for a body
/// whose model cannot be rewritten.
pub fn prepare(
    client: ClientFormat,
    p: &Provider,
    body: &Bytes,
    model: &str,
    rewrite: bool,
    model_at: Option<std::ops::Range<usize>>,
    created: u64,
) -> Result<Prepared, ProxyError> {
    let Some(upstream) = upstream_dialect(client, p) else {
        let edit = if rewrite {
            ModelEdit::Rewrite { at: model_at }
        } else {
            ModelEdit::Keep
        };
        return native(client, p, body, model, edit);
    };
    let t = translate::translate_request(client, upstream, body, model, &target_options(p, model))
        .map_err(ProxyError::Untranslatable)?;
    for w in &t.warnings {
        tracing::debug!(provider = %p.id, "translation: {w}");
    }
    for d in &t.downgrades {
        tracing::warn!(provider = %p.id, model, "translation: {d}");
    }
    let mut context = t.context;
    context.created = created;
    Ok(Prepared {
        body: t.body,
        seam: Some(Seam {
            upstream,
            context,
            adjusted: t.adjusted,
            downgrades: t.downgrades,
        }),
        rewrite: Some(BodyRewrite::Translate),
    })
}

/// The client's body for a provider of its own format: `model` rewritten when `rewrite`,
/// and — for an Anthropic provider — without thinking blocks an earlier translated turn
/// produced (their empty signature would be rejected).
fn native(
    client: ClientFormat,
    p: &Provider,
    body: &Bytes,
    model: &str,
    edit: ModelEdit,
) -> Result<Prepared, ProxyError> {
    let stripped = match (client, p.dialect) {
        (ClientFormat::Anthropic, Dialect::Anthropic) => translate::strip_unsigned_thinking(body),
        _ => None,
    };
    let rewrite = match (&edit, &stripped) {
        (ModelEdit::Keep, None) => None,
        _ => Some(BodyRewrite::Rewrite),
    };
    let body = match (edit, stripped) {
        (ModelEdit::Keep, None) => body.clone(),
        (ModelEdit::Keep, Some(s)) => s,
        (ModelEdit::Rewrite { at }, None) => {
            match at.and_then(|at| splice_model(body, at, model)) {
                Some(b) => b,
                None => rewrite_model(body, model)?,
            }
        }
        // The span was found in the body before stripping: rewrite the stripped one whole.
        (ModelEdit::Rewrite { .. }, Some(s)) => rewrite_model(&s, model)?,
    };
    Ok(Prepared {
        body,
        seam: None,
        rewrite,
    })
}

/// What a native (untranslated) body's `model` gets.
enum ModelEdit {
    /// Sent as the client wrote it.
    Keep,
    /// Set to the target's model; `at` is where the probe found the client's `model` value
    /// in the unchanged body (spliced there; parsed and rewritten when `None`).
    Rewrite { at: Option<std::ops::Range<usize>> },
}

/// An upstream response body, translated on the fly when the attempt has a seam. The
/// translator's output is whole client-format SSE events, so the hold, the guards and the
/// relay frame and judge it like a native stream. At the upstream's end it writes the
/// graceful end the upstream implied; a stream cut short is left without its terminal event
/// so the relay's truncation handling ends it with one error event of the client's format.
pub struct UpstreamBody {
    inner: Incoming,
    translator: Option<Box<StreamTranslator>>,
    ended: bool,
}

impl UpstreamBody {
    /// Wraps `inner`, translating it with `translator` when given.
    pub fn new(inner: Incoming, translator: Option<StreamTranslator>) -> Self {
        Self {
            inner,
            translator: translator.map(Box::new),
            ended: false,
        }
    }

    /// The bytes the translator still owes at the upstream's end (only a complete end).
    fn end(&mut self) -> Option<Bytes> {
        self.ended = true;
        let t = self.translator.as_mut()?;
        let out = t.finish_input();
        (!out.is_empty()).then_some(out)
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            let frame = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                None => return Poll::Ready(this.end().map(|b| Ok(Frame::data(b)))),
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                Some(Ok(f)) => f,
            };
            let Some(t) = this.translator.as_mut() else {
                return Poll::Ready(Some(Ok(frame)));
            };
            let Some(d) = frame.data_ref() else { continue };
            let out = t.feed(d);
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(out))));
            }
        }
    }
}

#[cfg(test)]
mod native_tests {
    use super::*;
    use crate::config::{LoadEnv, from_str};
    use crate::proxy::request::body::probe;
    use serde_json::Value;

    /// The first provider of a config text.
    pub(super) fn provider_of(text: &str) -> Provider {
        let cfg = from_str(
            text,
            std::path::Path::new("t.toml"),
            &LoadEnv::fixed(&[], "/tmp"),
        )
        .expect("valid config");
        cfg.providers[0].clone()
    }

    fn anthropic_provider() -> Provider {
        provider_of(
            "[[providers]]\nid = \"a\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n",
        )
    }

    fn prepared(body: &str, rewrite: bool) -> Value {
        let body = Bytes::from(body.to_owned());
        let at = probe(&body).unwrap().model_at;
        let p = anthropic_provider();
        let out = prepare(
            ClientFormat::Anthropic,
            &p,
            &body,
            "target-model",
            rewrite,
            at,
            0,
        )
        .expect("prepared");
        assert!(out.seam.is_none());
        serde_json::from_slice(&out.body).expect("valid JSON")
    }

    #[test]
    fn a_rewrite_after_stripping_thinking_before_the_model_sets_the_model() {
        // The unsigned thinking block comes before `model`, so stripping moves the model's
        // bytes: the span the probe found no longer fits and the rewrite must not use it.
        let body = r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"from elsewhere","signature":""},{"type":"text","text":"hello"}]}],"model":"client-model","max_tokens":5}"#;
        let v = prepared(body, true);
        assert_eq!(v["model"], "target-model");
        assert_eq!(
            v["messages"][1]["content"].as_array().map(Vec::len),
            Some(1)
        );
        assert_eq!(v["max_tokens"], 5);
        let kept = prepared(body, false);
        assert_eq!(kept["model"], "client-model");
        assert_eq!(
            kept["messages"][1]["content"].as_array().map(Vec::len),
            Some(1)
        );
    }

    #[test]
    fn a_rewrite_of_an_unchanged_body_splices_the_model_and_keeps_the_rest() {
        let body = r#"{ "model" : "client-model", "max_tokens": 5, "messages": [ {"role":"user","content":"hi"} ] }"#;
        let p = anthropic_provider();
        let b = Bytes::from(body);
        let at = probe(&b).unwrap().model_at;
        let out = prepare(ClientFormat::Anthropic, &p, &b, "target-model", true, at, 0).unwrap();
        assert_eq!(
            &out.body[..],
            body.replace("client-model", "target-model").as_bytes()
        );
    }
}

#[cfg(test)]
mod options_tests {
    use super::*;
    use crate::config::ReasoningEffort;

    fn provider() -> Provider {
        let text = "[[providers]]\nid = \"o\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\n\
            reasoning_effort = false\nmax_output_tokens = 32768\n\
            [providers.model_options.\"o*\"]\nreasoning_effort = true\nmax_completion_tokens = true\n\
            [providers.model_options.\"o3*\"]\nmax_output_tokens = 65536\n\
            [providers.model_options.\"o3-pro\"]\nmax_reasoning_effort = \"xhigh\"\n\
            [[providers.connections]]\nid = \"c\"\nauth = \"passthrough\"\n";
        super::native_tests::provider_of(text)
    }

    #[test]
    fn an_exact_name_wins_then_the_longest_pattern_then_the_provider() {
        let p = provider();
        let plain = target_options(&p, "gpt-4o");
        assert!(!plain.reasoning_effort && !plain.max_completion_tokens);
        assert_eq!(plain.max_output_tokens, Some(32768));
        let o1 = target_options(&p, "o1");
        assert!(o1.reasoning_effort && o1.max_completion_tokens);
        assert_eq!(
            o1.max_output_tokens,
            Some(32768),
            "not set on o*: the provider's"
        );
        let o3 = target_options(&p, "o3-mini");
        assert_eq!(o3.max_output_tokens, Some(65536), "o3* is longer than o*");
        assert!(!o3.reasoning_effort, "only the one best entry applies");
        let pro = target_options(&p, "o3-pro");
        assert_eq!(
            pro.max_reasoning_effort,
            ReasoningEffort::XHigh,
            "exact name"
        );
        assert_eq!(pro.max_output_tokens, Some(32768));
    }
}

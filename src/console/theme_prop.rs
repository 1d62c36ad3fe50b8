//! Property tests (proptest) for theme files: any role set to any value, any parent, cut or
//! spliced text, loads or fails with a message naming the file; it never panics.

use proptest::prelude::*;

use super::{DEFAULT_TOML, load_with};

/// Cases per property: 128, or 2048 with `SLUICE_RELIABILITY=long` (each case writes a file).
fn config() -> ProptestConfig {
    let long = std::env::var("SLUICE_RELIABILITY").is_ok_and(|v| v == "long");
    ProptestConfig {
        cases: if long { 2048 } else { 128 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Writes `text` as `themes/t.toml` and loads theme `t`; an error must name the file.
fn load(text: &str) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.toml");
    std::fs::write(&path, text).unwrap();
    for no_color in [false, true] {
        if let Err(e) = load_with("t", &[dir.path().to_path_buf()], no_color) {
            let msg = e.to_string();
            prop_assert!(
                msg.contains("t.toml"),
                "error does not name the file: {msg}"
            );
        }
    }
    Ok(())
}

fn style() -> impl Strategy<Value = String> {
    let colour = prop_oneof![
        Just("\"red\"".to_string()),
        Just("\"#303a52\"".to_string()),
        Just("\"#zzzzzz\"".to_string()),
        Just("\"#fff\"".to_string()),
        "\"[a-z#0-9]{0,10}\"",
        any::<i64>().prop_map(|n| n.to_string()),
    ];
    prop_oneof![
        colour.clone(),
        (colour.clone(), colour, any::<bool>(), "[a-z]{1,9}").prop_map(|(fg, bg, b, k)| {
            format!("{{ fg = {fg}, bg = {bg}, bold = {b}, {k} = true }}")
        }),
        Just("[1, 2]".to_string()),
        Just("{}".to_string()),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// A theme with arbitrary roles, values and parent.
    #[test]
    fn any_roles_and_parent_never_panic(
        roles in prop::collection::vec(("[a-z_]{1,18}|breaker_open|selection|border", style()), 0..8),
        parent in prop::option::of("t|default|light|high-contrast|[a-z]{1,6}"),
    ) {
        let mut text = String::new();
        if let Some(p) = parent {
            text.push_str(&format!("parent = \"{p}\"\n"));
        }
        text.push_str("[roles]\n");
        for (k, v) in roles {
            text.push_str(&format!("{k} = {v}\n"));
        }
        load(&text)?;
    }

    /// The default theme's text cut anywhere and spliced with arbitrary text.
    #[test]
    fn spliced_text_never_panics(at in any::<prop::sample::Index>(), cut in 0usize..40, insert in ".{0,16}") {
        let chars: Vec<char> = DEFAULT_TOML.chars().collect();
        let i = at.index(chars.len());
        let j = (i + cut).min(chars.len());
        let text: String = chars[..i].iter().copied().chain(insert.chars()).chain(chars[j..].iter().copied()).collect();
        load(&text)?;
    }
}

//! Property tests (proptest) for config loading: the shipped `config.toml` with any one value
//! replaced by a value of any type, any key removed, or its text cut or spliced with arbitrary
//! bytes, loads or fails with a message naming the file; it never panics.

use std::path::Path;

use proptest::prelude::*;

use super::{LoadEnv, from_str};

/// Cases per property: 256, or 4096 with `SLUICE_RELIABILITY=long`.
fn config() -> ProptestConfig {
    let long = std::env::var("SLUICE_RELIABILITY").is_ok_and(|v| v == "long");
    ProptestConfig {
        cases: if long { 4096 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const SHIPPED: &str = include_str!("../../../config.toml");
const FILE: &str = "/tmp/sluice-prop/config.toml";

/// Loads `text` with a few env vars set; an error must name the file.
fn load(text: &str) -> Result<(), TestCaseError> {
    let vars = [
        ("ANTHROPIC_API_KEY", "k"),
        ("OPENAI_API_KEY", "k"),
        ("T", "t"),
    ];
    let env = LoadEnv::fixed(&vars, "/tmp/sluice-prop");
    if let Err(e) = from_str(text, Path::new(FILE), &env) {
        let msg = e.to_string();
        prop_assert!(msg.contains(FILE), "error does not name the file: {msg}");
    }
    Ok(())
}

fn toml_value() -> impl Strategy<Value = toml::Value> {
    use toml::Value;
    let leaf = prop_oneof![
        any::<i64>().prop_map(Value::Integer),
        any::<f64>().prop_map(Value::Float),
        any::<bool>().prop_map(Value::Boolean),
        ".{0,16}".prop_map(Value::String),
        prop_oneof![
            Just("0s"),
            Just("18446744073709551615s"),
            Just("-1s"),
            Just("1ns"),
            Just("999999days"),
            Just("0.0.0.0:80"),
            Just("[::]:0"),
            Just("http://"),
            Just("env"),
            Just("passthrough"),
            Just("1KiB"),
            Just("0B"),
            Just("99999999999PiB"),
            Just("oauth"),
            Just("priority"),
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..3)
                .prop_map(|m| Value::Table(m.into_iter().collect())),
        ]
    })
}

/// Paths of every value in `v` (table keys and array indices).
fn paths(v: &toml::Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        toml::Value::Table(t) => {
            for (k, child) in t {
                prefix.push(k.clone());
                out.push(prefix.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        toml::Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                prefix.push(i.to_string());
                out.push(prefix.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

/// Replaces (or with `None` removes) the value at `path`.
fn edit(v: &mut toml::Value, path: &[String], new: Option<toml::Value>) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for p in parents {
        cur = match cur {
            toml::Value::Table(t) => t.get_mut(p).unwrap(),
            toml::Value::Array(a) => &mut a[p.parse::<usize>().unwrap()],
            _ => return,
        };
    }
    match (cur, new) {
        (toml::Value::Table(t), Some(n)) => {
            t.insert(last.clone(), n);
        }
        (toml::Value::Table(t), None) => {
            t.remove(last);
        }
        (toml::Value::Array(a), Some(n)) => a[last.parse::<usize>().unwrap()] = n,
        (toml::Value::Array(a), None) => {
            a.remove(last.parse::<usize>().unwrap());
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(config())]

    /// One value of the shipped config replaced by anything, or removed.
    #[test]
    fn any_value_anywhere_never_panics(pick in any::<prop::sample::Index>(), new in prop::option::of(toml_value())) {
        let mut doc: toml::Value = toml::from_str(SHIPPED).unwrap();
        let mut all = Vec::new();
        paths(&doc, &mut Vec::new(), &mut all);
        let path = pick.get(&all).clone();
        edit(&mut doc, &path, new);
        let text = toml::to_string(&doc).unwrap();
        load(&text)?;
    }

    /// The shipped text cut anywhere and spliced with arbitrary text.
    #[test]
    fn spliced_text_never_panics(at in any::<prop::sample::Index>(), cut in 0usize..64, insert in ".{0,24}") {
        let chars: Vec<char> = SHIPPED.chars().collect();
        let i = at.index(chars.len());
        let j = (i + cut).min(chars.len());
        let text: String = chars[..i].iter().chain(insert.chars().collect::<Vec<_>>().iter()).chain(chars[j..].iter()).collect();
        load(&text)?;
    }

    /// Arbitrary text.
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        load(&text)?;
    }
}

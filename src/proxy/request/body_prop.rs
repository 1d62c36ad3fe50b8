//! Property tests (proptest) for the body probe and the model rewrite: arbitrary bytes and
//! deep nesting never panic, a valid body's `model` and `stream` are read exactly, and the
//! rewrite changes `model` and nothing else.

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::{ProxyError, probe, rewrite_model, splice_model};

/// Cases per property: 128, or 4096 with `SLUICE_RELIABILITY=long`.
fn config() -> ProptestConfig {
    let long = std::env::var("SLUICE_RELIABILITY").is_ok_and(|v| v == "long");
    ProptestConfig {
        cases: if long { 4096 } else { 128 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Any JSON value, a few levels deep.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A request object without `model`/`stream` keys.
fn members() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map("[a-z_]{1,8}", value(), 0..6).prop_map(|m| {
        m.into_iter()
            .filter(|(k, _)| k != "model" && k != "stream")
            .collect()
    })
}

proptest! {
    #![proptest_config(config())]

    /// Arbitrary bytes give a probe or a `BadRequest`, never a panic.
    #[test]
    fn probe_never_panics_on_bytes(body in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Err(e) = probe(&body) {
            prop_assert!(matches!(e, ProxyError::BadRequest(_)), "{e:?}");
        }
        let _ = rewrite_model(&body, "m");
    }

    /// A valid object with a non-blank string `model` probes to exactly that model and stream flag.
    #[test]
    fn probe_reads_model_and_stream(mut obj in members(), model in ".{1,40}", stream in prop::option::of(value())) {
        prop_assume!(!model.trim().is_empty());
        obj.insert("model".into(), Value::String(model.clone()));
        if let Some(s) = &stream {
            obj.insert("stream".into(), s.clone());
        }
        let body = serde_json::to_vec(&Value::Object(obj)).unwrap();
        let p = probe(&body).unwrap();
        prop_assert_eq!(p.model, model);
        prop_assert_eq!(p.stream, stream == Some(Value::Bool(true)));
    }

    /// A non-string `model` is a `BadRequest`.
    #[test]
    fn probe_refuses_a_non_string_model(mut obj in members(), model in value()) {
        prop_assume!(!model.is_string());
        obj.insert("model".into(), model);
        let body = serde_json::to_vec(&Value::Object(obj)).unwrap();
        prop_assert!(matches!(probe(&body), Err(ProxyError::BadRequest(_))));
    }

    /// The rewrite sets `model` and leaves every other member equal.
    #[test]
    fn rewrite_changes_only_the_model(obj in members(), old in prop::option::of(".{0,20}"), new in ".{0,40}") {
        let mut with = obj.clone();
        if let Some(o) = old {
            with.insert("model".into(), Value::String(o));
        }
        let body = serde_json::to_vec(&Value::Object(with)).unwrap();
        let out: Value = serde_json::from_slice(&rewrite_model(&body, &new).unwrap()).unwrap();
        let mut expected = obj;
        expected.insert("model".into(), Value::String(new));
        prop_assert_eq!(out, Value::Object(expected));
    }

    /// Splicing at the probed span gives the same object as the full rewrite, and keeps every
    /// byte outside the model's value.
    #[test]
    fn splice_at_the_probed_span_equals_the_rewrite(mut obj in members(), old in ".{1,20}", new in ".{0,40}", pretty in any::<bool>()) {
        prop_assume!(!old.trim().is_empty());
        obj.insert("model".into(), Value::String(old));
        let v = Value::Object(obj);
        let body = if pretty { serde_json::to_vec_pretty(&v) } else { serde_json::to_vec(&v) }.unwrap();
        let at = probe(&body).unwrap().model_at.unwrap();
        let out = splice_model(&body, at.clone(), &new).unwrap();
        let spliced: Value = serde_json::from_slice(&out).unwrap();
        let rewritten: Value = serde_json::from_slice(&rewrite_model(&body, &new).unwrap()).unwrap();
        prop_assert_eq!(spliced, rewritten);
        prop_assert_eq!(&out[..at.start], &body[..at.start]);
        prop_assert_eq!(&out[out.len() - (body.len() - at.end)..], &body[at.end..]);
    }

    /// Deep nesting (arrays or objects, beside or inside `model`) is refused or probed, never
    /// a stack overflow.
    #[test]
    fn deep_nesting_never_overflows(depth in 1usize..20_000, objects in any::<bool>(), inside in any::<bool>()) {
        let (open, close) = if objects { ("{\"a\":", "}") } else { ("[", "]") };
        let nested = format!("{}1{}", open.repeat(depth), close.repeat(depth));
        let body = if inside {
            format!("{{\"model\":{nested}}}")
        } else {
            format!("{{\"model\":\"m\",\"messages\":{nested}}}")
        };
        let _ = probe(body.as_bytes());
        let _ = rewrite_model(body.as_bytes(), "x");
    }
}

use super::*;

#[test]
fn parses_targets() {
    let t = parse_target("openrouter/z-ai/glm-5").unwrap();
    assert_eq!((t.provider.as_str(), t.connection, t.model.as_str()), ("openrouter", None, "z-ai/glm-5"));
    let t = parse_target("anthropic:mine/claude-haiku-4-5").unwrap();
    assert_eq!(t.connection.as_deref(), Some("mine"));
    assert!(parse_target("nomodel").is_none());
    assert!(parse_target("p/").is_none());
}

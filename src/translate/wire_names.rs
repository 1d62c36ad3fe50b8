//! Tool names and tool-call ids that one side accepts and the other does not.
//!
//! - **Names.** Chat Completions and Anthropic both take tool names matching
//!   `^[a-zA-Z0-9_-]{1,64}$`; MCP tools often have longer names or other characters. Such a
//!   name is shortened to a stable form (its valid characters, cut, plus an 8-hex-digit hash
//!   of the whole name), so every turn of a conversation gets the same upstream name; the
//!   reply's tool calls get the client's name back through [`restore_name`].
//! - **Ids.** Anthropic tool ids must match `^[a-zA-Z0-9_-]+$`; OpenAI-compatible servers
//!   produce ids such as `functions.Bash:0`. [`id_for_anthropic`] escapes such an id
//!   reversibly (`sx_functions_2EBash_3A0`) and [`id_from_anthropic`] undoes it, so an id
//!   keeps its identity whichever provider serves the next turn. Both are pure functions of
//!   the id: nothing is stored.

use std::borrow::Cow;
use std::fmt::Write as _;

use super::ClientFormat;

/// Longest tool name both Chat Completions and Anthropic accept.
pub const MAX_TOOL_NAME: usize = 64;

/// Prefix of an escaped tool id.
const ID_MARK: &str = "sx_";

fn name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// `name` as both sides accept it: unchanged when valid, else its valid characters (others
/// become `_`) cut to leave room for `_` and an 8-hex-digit FNV-1a hash of the whole name.
pub fn tool_name_for_wire(name: &str) -> Cow<'_, str> {
    if !name.is_empty() && name.len() <= MAX_TOOL_NAME && name.bytes().all(name_char) {
        return Cow::Borrowed(name);
    }
    let keep = MAX_TOOL_NAME - 9;
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii() && name_char(c as u8) {
                c
            } else {
                '_'
            }
        })
        .take(keep)
        .collect();
    let _ = write!(out, "_{:08x}", fnv1a(name.as_bytes()));
    Cow::Owned(out)
}

/// The client's name for a tool call named `wire` upstream, from `(wire, client)` pairs.
pub fn restore_name<'a>(pairs: &'a [(String, String)], wire: &'a str) -> &'a str {
    pairs
        .iter()
        .find(|(w, _)| w == wire)
        .map_or(wire, |(_, c)| c.as_str())
}

/// Records `name`'s wire form in `pairs` when it differs; returns the wire form.
pub fn shorten_into(pairs: &mut Vec<(String, String)>, name: &str) -> String {
    let wire = tool_name_for_wire(name);
    if wire != name && !pairs.iter().any(|(w, _)| *w == *wire) {
        pairs.push((wire.to_string(), name.to_string()));
    }
    wire.into_owned()
}

/// A tool call's `(id, name)` as the client gets it: the client's tool name back, and the
/// id in the form the client's format accepts (escaped for Anthropic clients, unescaped for
/// OpenAI clients).
pub fn for_client(
    client: ClientFormat,
    tool_names: &[(String, String)],
    id: &str,
    name: &str,
) -> (String, String) {
    let id = match client {
        ClientFormat::Anthropic => id_for_anthropic(id),
        ClientFormat::Chat | ClientFormat::Responses => id_from_anthropic(id),
    };
    (id.into_owned(), restore_name(tool_names, name).to_owned())
}

/// 32-bit FNV-1a: stable across builds and platforms (a name must map the same way in every
/// turn and every sluice version).
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// A tool-call id as Anthropic accepts it: unchanged when it matches `^[a-zA-Z0-9_-]+$` (and
/// does not start with the escape mark), else `sx_` plus the id with every byte other than
/// `[A-Za-z0-9-]` written as `_XX` (hex).
pub fn id_for_anthropic(id: &str) -> Cow<'_, str> {
    if !id.is_empty() && id.bytes().all(name_char) && !id.starts_with(ID_MARK) {
        return Cow::Borrowed(id);
    }
    let mut out = String::with_capacity(ID_MARK.len() + id.len() * 2);
    out.push_str(ID_MARK);
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "_{b:02X}");
        }
    }
    Cow::Owned(out)
}

/// Undoes [`id_for_anthropic`]; any other id (or one that does not decode) is returned
/// unchanged.
pub fn id_from_anthropic(id: &str) -> Cow<'_, str> {
    let Some(rest) = id.strip_prefix(ID_MARK) else {
        return Cow::Borrowed(id);
    };
    let b = rest.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'_' {
            let byte = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match byte {
                Some(x) => out.push(x),
                None => return Cow::Borrowed(id),
            }
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_or(Cow::Borrowed(id), Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid_name(n: &str) -> bool {
        !n.is_empty() && n.len() <= MAX_TOOL_NAME && n.bytes().all(name_char)
    }

    #[test]
    fn valid_names_are_unchanged() {
        for n in [
            "Bash",
            "mcp__github__create_issue",
            "a-b_c",
            &"x".repeat(64),
        ] {
            assert_eq!(tool_name_for_wire(n), n);
        }
    }

    #[test]
    fn long_or_odd_names_shorten_stably_and_validly() {
        let long = format!("mcp__{}__tool", "very_long_server_name".repeat(4));
        let a = tool_name_for_wire(&long);
        assert!(valid_name(&a), "{a}");
        assert_eq!(a.len(), MAX_TOOL_NAME);
        assert_eq!(a, tool_name_for_wire(&long), "same input, same name");
        let other = format!("{long}2");
        assert_ne!(
            a,
            tool_name_for_wire(&other),
            "the hash tells apart a shared prefix"
        );
        let dotted = tool_name_for_wire("files.read:v2");
        assert!(valid_name(&dotted), "{dotted}");
        assert!(dotted.starts_with("files_read_v2_"), "{dotted}");
        assert!(valid_name(&tool_name_for_wire("")));
        assert!(valid_name(&tool_name_for_wire("ünïcode tool")));
    }

    #[test]
    fn restore_finds_the_client_name() {
        let mut pairs = Vec::new();
        let long = "n".repeat(80);
        let wire = shorten_into(&mut pairs, &long);
        assert_eq!(shorten_into(&mut pairs, "Bash"), "Bash");
        assert_eq!(pairs.len(), 1, "only changed names are recorded, once");
        shorten_into(&mut pairs, &long);
        assert_eq!(pairs.len(), 1);
        assert_eq!(restore_name(&pairs, &wire), long);
        assert_eq!(restore_name(&pairs, "Bash"), "Bash");
    }

    #[test]
    fn ids_escape_and_come_back() {
        for id in [
            "functions.Bash:0",
            "call a/b",
            "sx_looks_escaped",
            "",
            "émoji🙂",
            "_",
        ] {
            let e = id_for_anthropic(id);
            assert!(
                !e.is_empty() && e.bytes().all(name_char),
                "{id:?} -> {e:?} is not a valid Anthropic id"
            );
            assert_eq!(id_from_anthropic(&e), id, "{id:?} -> {e:?}");
        }
        assert_eq!(id_for_anthropic("toolu_01A-b"), "toolu_01A-b");
        assert_eq!(
            id_for_anthropic("functions.Bash:0"),
            "sx_functions_2EBash_3A0"
        );
        assert_eq!(id_from_anthropic("toolu_01"), "toolu_01");
        assert_eq!(
            id_from_anthropic("sx_bad_Z"),
            "sx_bad_Z",
            "undecodable: unchanged"
        );
    }
}

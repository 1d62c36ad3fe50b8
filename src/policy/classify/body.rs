//! `Body`: one upstream error body, prepared once for marker matching and field extraction.
//!
//! Markers match case-insensitively against the body as raw text and, when it contains JSON
//! string escapes, against the text with those escapes decoded (§7), so a
//! marker `额度不足` matches a body that says `\u989d\u5ea6\u4e0d\u8db3`.

use serde_json::Value;

/// Longest console message, in characters (§2: `last_error` is a short text).
pub(super) const MESSAGE_MAX_CHARS: usize = 200;

/// An error body prepared for matching.
pub(super) struct Body {
    /// Raw text, lowercased.
    raw: String,
    /// Text with JSON string escapes decoded, lowercased; `None` when there were none.
    decoded: Option<String>,
    /// Parsed JSON, when the body is JSON.
    json: Option<Value>,
    /// Lossy UTF-8 text as received.
    text: String,
}

impl Body {
    pub(super) fn new(bytes: &[u8]) -> Self {
        let text = String::from_utf8_lossy(bytes).into_owned();
        let decoded = text
            .contains('\\')
            .then(|| decode_json_escapes(&text).to_lowercase());
        Self {
            raw: text.to_lowercase(),
            decoded,
            json: serde_json::from_slice(bytes).ok(),
            text,
        }
    }

    /// Case-insensitive substring match of one marker, raw or escape-decoded. An empty marker
    /// never matches (validation rejects it; this keeps a bad list harmless).
    pub(super) fn contains(&self, marker: &str) -> bool {
        let m = marker.trim().to_lowercase();
        if m.is_empty() {
            return false;
        }
        self.raw.contains(&m) || self.decoded.as_ref().is_some_and(|d| d.contains(&m))
    }

    /// Any marker of the list matches.
    pub(super) fn contains_any<S: AsRef<str>>(&self, markers: &[S]) -> bool {
        markers.iter().any(|m| self.contains(m.as_ref()))
    }

    /// Any marker of `markers` matches somewhere that does not overlap a match of a marker
    /// of `apart` (case-insensitive, like [`Self::contains`]): the quota marker
    /// `limit reached` found in "Concurrency limit reached" overlaps the concurrency marker
    /// `concurrency limit`, so it is about concurrency, not quota. Both lists are matched in
    /// one text, the escape-decoded one when the body had escapes (else the raw one), so an
    /// escaped phrase cannot hide from one list while the other sees it.
    pub(super) fn contains_any_apart<S: AsRef<str>, T: AsRef<str>>(
        &self,
        markers: &[S],
        apart: &[T],
    ) -> bool {
        let text = self.decoded.as_deref().unwrap_or(&self.raw);
        let spans = Spans::new(
            apart
                .iter()
                .flat_map(|a| occurrences(text, a.as_ref()))
                .collect(),
        );
        markers.iter().any(|m| {
            occurrences(text, m.as_ref())
                .iter()
                .any(|&place| !spans.overlaps(place))
        })
    }

    /// The error object (Anthropic/OpenAI/Gemini `error`, Gemini's one-element array form)
    /// or the top level when there is no `error` object.
    fn error_root(&self) -> Option<&Value> {
        let root = match self.json.as_ref()? {
            Value::Array(items) => items.first()?,
            other => other,
        };
        match root.get("error") {
            Some(e @ Value::Object(_)) => Some(e),
            _ => Some(root),
        }
    }

    /// The body's error kinds, lowercased: `error.type`, `error.code`, `error.status`
    /// (numbers as text), or the same keys at top level; a top-level `type: "error"` is
    /// skipped.
    pub(super) fn error_kinds(&self) -> Vec<String> {
        let Some(root) = self.error_root() else {
            return Vec::new();
        };
        ["type", "code", "status"]
            .iter()
            .filter_map(|k| match root.get(*k)? {
                Value::String(s) => Some(s.to_lowercase()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .filter(|s| s != "error" && !s.is_empty())
            .collect()
    }

    /// Short, single-line excerpt for the console: the upstream `error.message` (or
    /// `{"error":"text"}`, or a top-level `message`), else the start of the body text. At
    /// most [`MESSAGE_MAX_CHARS`] characters, with `sk-…` key-like tokens masked.
    pub(super) fn message(&self) -> String {
        let root = self.json.as_ref().map(|j| match j {
            Value::Array(items) => items.first().unwrap_or(j),
            other => other,
        });
        let from_json = root.and_then(|r| {
            let err = r.get("error");
            err.and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .or_else(|| err.and_then(Value::as_str))
                .or_else(|| r.get("message").and_then(Value::as_str))
        });
        excerpt(from_json.unwrap_or(&self.text))
    }
}

/// Collapses whitespace, masks key-like tokens and truncates to [`MESSAGE_MAX_CHARS`].
fn excerpt(s: &str) -> String {
    let words: Vec<String> = s
        .split_whitespace()
        .map(|w| match w.find("sk-") {
            Some(i) if w.len() - i > 10 => format!("{}sk-…", &w[..i]),
            _ => w.to_string(),
        })
        .collect();
    let joined = words.join(" ");
    if joined.chars().count() <= MESSAGE_MAX_CHARS {
        return joined;
    }
    let mut out: String = joined.chars().take(MESSAGE_MAX_CHARS - 1).collect();
    out.push('…');
    out
}

/// Decodes JSON string escapes (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\uXXXX`
/// including surrogate pairs) anywhere in `s`; malformed escapes are kept verbatim.
pub(super) fn decode_json_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let esc = &rest[i..];
        let (decoded, used) = decode_one(esc);
        match decoded {
            Some(c) => out.push(c),
            None => out.push_str(&esc[..used]),
        }
        rest = &esc[used..];
    }
    out.push_str(rest);
    out
}

/// Decodes the escape at the start of `esc` (which starts with `\`): the char, if valid, and
/// the bytes consumed (at least 1).
fn decode_one(esc: &str) -> (Option<char>, usize) {
    let simple = match esc.as_bytes().get(1) {
        Some(b'"') => Some('"'),
        Some(b'\\') => Some('\\'),
        Some(b'/') => Some('/'),
        Some(b'b') => Some('\u{8}'),
        Some(b'f') => Some('\u{c}'),
        Some(b'n') => Some('\n'),
        Some(b'r') => Some('\r'),
        Some(b't') => Some('\t'),
        Some(b'u') => None,
        _ => return (None, 1),
    };
    if let Some(c) = simple {
        return (Some(c), 2);
    }
    let Some(hi) = hex4(esc.get(2..6)) else {
        return (None, 1);
    };
    if (0xD800..0xDC00).contains(&hi) {
        if esc.get(6..8) == Some("\\u")
            && let Some(lo) = hex4(esc.get(8..12))
            && (0xDC00..0xE000).contains(&lo)
        {
            let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
            return (char::from_u32(c), 12);
        }
        return (None, 1);
    }
    match char::from_u32(hi) {
        Some(c) => (Some(c), 6),
        None => (None, 1),
    }
}

fn hex4(s: Option<&str>) -> Option<u32> {
    let s = s?;
    if s.len() != 4 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

/// Every place (byte start, byte end) lowercased `text` holds `marker` (trimmed and
/// lowercased), overlapping ones included. An empty marker is nowhere, as in
/// [`Body::contains`].
fn occurrences(text: &str, marker: &str) -> Vec<(usize, usize)> {
    let m = marker.trim().to_lowercase();
    let mut found = Vec::new();
    if m.is_empty() {
        return found;
    }
    let mut from = 0;
    while let Some(k) = text.get(from..).and_then(|rest| rest.find(m.as_str())) {
        let i = from + k;
        found.push((i, i + m.len()));
        // The next search starts one character later, so overlapping places are found too.
        from = i + text[i..].chars().next().map_or(1, char::len_utf8);
    }
    found
}

/// Byte ranges `[start, end)` sorted by start, with the furthest end reached so far, so
/// whether a range overlaps any of them is one binary search: matching the many places of a
/// marker against the many places of another (an error body of up to 1 MiB that repeats a
/// phrase) stays O((n + m) log n) instead of O(n × m).
struct Spans {
    /// Ranges sorted by start.
    sorted: Vec<(usize, usize)>,
    /// `reach[k]`: the largest end among `sorted[..=k]`.
    reach: Vec<usize>,
}

impl Spans {
    fn new(mut ranges: Vec<(usize, usize)>) -> Self {
        ranges.sort_unstable();
        let reach = ranges
            .iter()
            .scan(0, |far, &(_, e)| {
                *far = e.max(*far);
                Some(*far)
            })
            .collect();
        Self {
            sorted: ranges,
            reach,
        }
    }

    /// Whether `[start, end)` shares a byte with any range: among the ranges that start
    /// before `end`, one reaches past `start`.
    fn overlaps(&self, (start, end): (usize, usize)) -> bool {
        let before_end = self.sorted.partition_point(|&(s, _)| s < end);
        before_end
            .checked_sub(1)
            .and_then(|k| self.reach.get(k))
            .is_some_and(|&far| far > start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_find_overlaps_by_binary_search() {
        let spans = Spans::new(vec![(20, 25), (0, 10), (3, 4)]);
        assert!(spans.overlaps((9, 12)), "shares byte 9 with [0, 10)");
        assert!(!spans.overlaps((10, 20)), "touching ends share no byte");
        assert!(spans.overlaps((24, 30)));
        assert!(!spans.overlaps((25, 26)));
        assert!(
            spans.overlaps((5, 6)),
            "inside [0, 10), past the short [3, 4)"
        );
        assert!(!Spans::new(Vec::new()).overlaps((0, 5)));
    }

    #[test]
    fn a_body_repeating_a_phrase_is_matched_in_one_pass() {
        // 1 MiB of "concurrency limit reached": 40,000 quota places, each overlapped by a
        // concurrency place (checked pair by pair, about 8 × 10⁸ comparisons), then one free quota
        // place at the end.
        let mut text = "Concurrency limit reached. ".repeat(40_000);
        assert!(
            !Body::new(text.as_bytes())
                .contains_any_apart(&["limit reached"], &["concurrency limit"])
        );
        text.push_str("Daily limit reached.");
        assert!(
            Body::new(text.as_bytes())
                .contains_any_apart(&["limit reached"], &["concurrency limit"])
        );
    }

    #[test]
    fn a_marker_overlapping_an_apart_marker_does_not_count() {
        let quota = ["limit reached", "quota"];
        let conc = ["concurrency limit"];
        let b = Body::new(br#"{"error":{"message":"Concurrency limit reached"}}"#);
        assert!(b.contains_any(&quota), "the plain match still sees it");
        assert!(!b.contains_any_apart(&quota, &conc));
        let b = Body::new(b"Concurrency limit reached; daily limit reached");
        assert!(
            b.contains_any_apart(&quota, &conc),
            "a second, separate match counts"
        );
        let b = Body::new(b"concurrency limit exceeded, monthly quota exceeded");
        assert!(b.contains_any_apart(&quota, &conc));
        let b = Body::new(br#"{"message":"Concurrency\u0020limit reached"}"#);
        assert!(
            !b.contains_any_apart(&quota, &conc),
            "the concurrency phrase is seen in the decoded text, so the quota match inside it is too"
        );
        let b = Body::new(b"xaaa");
        assert!(
            b.contains_any_apart(&["aa"], &["xa"]),
            "the overlapping second place of `aa` stands apart from `xa`"
        );
        let b = Body::new(b"usage limit reached");
        assert!(
            b.contains_any_apart(&quota, &[""]),
            "an empty apart marker excludes nothing"
        );
        assert!(
            !b.contains_any_apart(&[""], &conc),
            "an empty marker matches nothing"
        );
    }

    #[test]
    fn escapes_decode() {
        assert_eq!(decode_json_escapes(r"\u989d\u5ea6\u4e0d\u8db3"), "额度不足");
        assert_eq!(decode_json_escapes(r#"a\"b\\c\/d\n"#), "a\"b\\c/d\n");
        assert_eq!(decode_json_escapes(r"\ud83d\ude00!"), "😀!");
        assert_eq!(decode_json_escapes(r"\ud83d alone"), r"\ud83d alone");
        assert_eq!(decode_json_escapes(r"\uZZZZ \x \"), r"\uZZZZ \x \");
        assert_eq!(decode_json_escapes("\\u98"), "\\u98");
    }

    #[test]
    fn message_excerpt() {
        let b = Body::new(
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(b.message(), "Overloaded");
        assert_eq!(b.error_kinds(), vec!["overloaded_error".to_string()]);
        let b = Body::new(
            br#"[{"error":{"code":429,"message":"Quota hit.","status":"RESOURCE_EXHAUSTED"}}]"#,
        );
        assert_eq!(b.message(), "Quota hit.");
        assert_eq!(
            b.error_kinds(),
            vec!["429".to_string(), "resource_exhausted".to_string()]
        );
        let b = Body::new(b"Incorrect API key provided: sk-proj-abcdefghijklmnop.\n\n bye");
        assert_eq!(b.message(), "Incorrect API key provided: sk-… bye");
        let long = "é".repeat(500);
        let m = Body::new(long.as_bytes()).message();
        assert_eq!(m.chars().count(), MESSAGE_MAX_CHARS);
        assert!(m.ends_with('…'));
    }
}

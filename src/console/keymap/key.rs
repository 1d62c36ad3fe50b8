//! [`Key`]: one key as written in `[console.keys]` (`"c"`, `"G"`, `"<C-r>"`, `"<S-Tab>"`,
//! `"<Enter>"`, `"<Esc>"`, `"<Space>"`, …) and as shown in the help (`c`, `G`, `ctrl-r`,
//! `shift-tab`, `enter`, `esc`, `space`).

use std::fmt;
use std::str::FromStr;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// One key: a key code, with or without the control key. Shift is part of the code (`G`,
/// `BackTab`), so it is not tracked separately; alt is not supported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    /// The key code (`Char('G')` for shift-g, `BackTab` for shift-tab).
    pub code: KeyCode,
    /// True when the control key must be held; otherwise it must not be.
    pub ctrl: bool,
}

/// Named keys accepted inside `<…>` (case-insensitive), with the name shown in the help.
const NAMED: &[(&str, KeyCode, &str)] = &[
    ("enter", KeyCode::Enter, "enter"),
    ("cr", KeyCode::Enter, "enter"),
    ("return", KeyCode::Enter, "enter"),
    ("esc", KeyCode::Esc, "esc"),
    ("escape", KeyCode::Esc, "esc"),
    ("space", KeyCode::Char(' '), "space"),
    ("tab", KeyCode::Tab, "tab"),
    ("bs", KeyCode::Backspace, "backspace"),
    ("backspace", KeyCode::Backspace, "backspace"),
    ("del", KeyCode::Delete, "del"),
    ("delete", KeyCode::Delete, "del"),
    ("up", KeyCode::Up, "↑"),
    ("down", KeyCode::Down, "↓"),
    ("left", KeyCode::Left, "←"),
    ("right", KeyCode::Right, "→"),
    ("home", KeyCode::Home, "home"),
    ("end", KeyCode::End, "end"),
    ("pageup", KeyCode::PageUp, "pgup"),
    ("pagedown", KeyCode::PageDown, "pgdn"),
    ("lt", KeyCode::Char('<'), "<"),
];

impl Key {
    /// A plain character key (`'G'` means shift-g).
    pub const fn ch(c: char) -> Self {
        Self {
            code: KeyCode::Char(c),
            ctrl: false,
        }
    }

    /// A control-character key, e.g. `Key::ctrl('c')` for ctrl-c.
    pub const fn ctrl(c: char) -> Self {
        Self {
            code: KeyCode::Char(c),
            ctrl: true,
        }
    }

    /// A non-character key without modifiers (`KeyCode::Enter`, `KeyCode::Up`, …).
    pub const fn code(code: KeyCode) -> Self {
        Self { code, ctrl: false }
    }

    /// True when `event` is this key (shift and alt are ignored; control must match).
    pub fn matches(&self, event: &KeyEvent) -> bool {
        event.modifiers.contains(KeyModifiers::CONTROL) == self.ctrl && event.code == self.code
    }
}

/// Why a key string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyParseError(pub String);

impl fmt::Display for KeyParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "'{}' is not a key; write \"c\", \"G\" (shift), \"<C-r>\", \"<S-Tab>\", \"<Enter>\", \
             \"<Esc>\", \"<Space>\", \"<Up>\" or \"<F5>\"",
            self.0
        )
    }
}

impl std::error::Error for KeyParseError {}

impl FromStr for Key {
    type Err = KeyParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || KeyParseError(s.to_owned());
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if !c.is_control() => return Ok(Key::ch(c)),
            (Some('<'), Some(_)) if s.ends_with('>') => {}
            _ => return Err(bad()),
        }
        let inner = s.get(1..s.len() - 1).ok_or_else(bad)?;
        // `<C-->` would be ctrl-minus; split the modifiers off the front only.
        let mut ctrl = false;
        let mut shift = false;
        let mut rest = inner;
        while let Some((m, tail)) = rest.split_once('-')
            && !tail.is_empty()
        {
            match m.to_ascii_lowercase().as_str() {
                "c" | "ctrl" => ctrl = true,
                "s" | "shift" => shift = true,
                _ => return Err(bad()),
            }
            rest = tail;
        }
        let lower = rest.to_ascii_lowercase();
        let mut rc = rest.chars();
        let code = match (rc.next(), rc.next()) {
            (Some(c), None) if !c.is_control() => {
                if shift {
                    if !c.is_alphabetic() {
                        return Err(bad());
                    }
                    shift = false;
                    KeyCode::Char(c.to_uppercase().next().unwrap_or(c))
                } else {
                    KeyCode::Char(c)
                }
            }
            _ => {
                if let Some(n) = lower.strip_prefix('f')
                    && let Ok(n) = n.parse::<u8>()
                    && (1..=12).contains(&n)
                {
                    KeyCode::F(n)
                } else {
                    NAMED
                        .iter()
                        .find(|(name, _, _)| *name == lower)
                        .map(|(_, code, _)| *code)
                        .ok_or_else(bad)?
                }
            }
        };
        let code = match (code, shift) {
            (KeyCode::Tab, true) => KeyCode::BackTab,
            (code, false) => code,
            (_, true) => return Err(bad()),
        };
        Ok(Key { code, ctrl })
    }
}

impl fmt::Display for Key {
    /// As shown in the help: `c`, `G`, `ctrl-r`, `shift-tab`, `enter`, `space`, `↓`, `f5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ctrl {
            f.write_str("ctrl-")?;
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::BackTab => f.write_str("shift-tab"),
            KeyCode::F(n) => write!(f, "f{n}"),
            code => match NAMED.iter().find(|(_, c, _)| *c == code) {
                Some((_, _, shown)) => f.write_str(shown),
                None => write!(f, "{code:?}"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Key {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_the_documented_syntax() {
        assert_eq!(parse("c"), Key::ch('c'));
        assert_eq!(parse("G"), Key::ch('G'));
        assert_eq!(parse("?"), Key::ch('?'));
        assert_eq!(parse("<C-r>"), Key::ctrl('r'));
        assert_eq!(parse("<c-R>"), Key::ctrl('R'));
        assert_eq!(parse("<S-Tab>"), Key::code(KeyCode::BackTab));
        assert_eq!(parse("<S-g>"), Key::ch('G'));
        assert_eq!(parse("<Enter>"), Key::code(KeyCode::Enter));
        assert_eq!(parse("<esc>"), Key::code(KeyCode::Esc));
        assert_eq!(parse("<Space>"), Key::ch(' '));
        assert_eq!(parse("<Down>"), Key::code(KeyCode::Down));
        assert_eq!(parse("<F5>"), Key::code(KeyCode::F(5)));
        assert_eq!(parse("<C-->"), Key::ctrl('-'));
        assert_eq!(parse("<"), Key::ch('<'));
        assert_eq!(parse("<lt>"), Key::ch('<'));
    }

    #[test]
    fn refuses_what_it_cannot_express() {
        for bad in [
            "", "ab", "<>", "<X-r>", "<A-r>", "<S-Up>", "<S-1>", "<Nope>", "<F13>", "\t",
        ] {
            let e = bad.parse::<Key>().unwrap_err();
            assert!(e.to_string().contains("is not a key"), "{bad}: {e}");
        }
    }

    #[test]
    fn displays_like_the_help() {
        for (s, shown) in [
            ("c", "c"),
            ("G", "G"),
            ("<C-r>", "ctrl-r"),
            ("<S-Tab>", "shift-tab"),
            ("<Enter>", "enter"),
            ("<Space>", "space"),
            ("<Up>", "↑"),
            ("<F5>", "f5"),
        ] {
            assert_eq!(parse(s).to_string(), shown);
        }
    }

    #[test]
    fn matching_ignores_shift_but_not_ctrl() {
        let shift_g = KeyEvent::new(KeyCode::Char('G'), KeyModifiers::SHIFT);
        assert!(Key::ch('G').matches(&shift_g));
        let ctrl_r = KeyEvent::new(KeyCode::Char('r'), KeyModifiers::CONTROL);
        assert!(Key::ctrl('r').matches(&ctrl_r));
        assert!(!Key::ch('r').matches(&ctrl_r));
    }
}

//! `Theme`: semantic console styles loaded from TOML files of roles (README "The console").
//!
//! A theme file names *roles* (`ok`, `error`, `breaker_open`, …), not widgets, so panels ask for
//! "the style of an open breaker" and a theme decides what that looks like. A file may name a
//! `parent`; roles it omits resolve through the parent chain and finally through `default`.
//! The three shipped themes are embedded in the binary, so sluice works without `themes/`;
//! a file of the same name in a search directory wins over the embedded copy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ratatui::style::{Color, Modifier, Style};

/// Embedded copy of `themes/default.toml`.
pub const DEFAULT_TOML: &str = include_str!("../../themes/default.toml");
const LIGHT_TOML: &str = include_str!("../../themes/light.toml");
const HIGH_CONTRAST_TOML: &str = include_str!("../../themes/high-contrast.toml");

/// Themes built into the binary: (name, TOML text).
pub const BUILTIN: &[(&str, &str)] = &[
    ("default", DEFAULT_TOML),
    ("light", LIGHT_TOML),
    ("high-contrast", HIGH_CONTRAST_TOML),
];

/// Most `parent` links followed from the named theme: a chain is at most 4 deep.
pub const MAX_PARENT_DEPTH: usize = 4;

/// A semantic role a theme styles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Breaker closed (healthy).
    BreakerClosed,
    /// Breaker degraded.
    BreakerDegraded,
    /// Breaker open (tripped).
    BreakerOpen,
    /// Breaker half-open (probing).
    BreakerHalfOpen,
    /// Connection cooling down.
    Cooling,
    /// Connection waiting for quota.
    QuotaWait,
    /// Terminal failure (needs an operator).
    Terminal,
    /// Model lockout.
    Lockout,
    /// Queue at capacity.
    QueueFull,
    /// Success (2xx statuses, ok outcomes).
    Ok,
    /// Failure (error statuses, failed outcomes).
    Error,
    /// De-emphasised text (hints, empty values, unfocused borders).
    Muted,
    /// Panel and screen titles.
    Title,
    /// The selected row.
    Selection,
    /// Borders of the focused panel.
    Border,
    /// Quota preflight warning: a connection's binding quota window is low.
    QuotaWarn,
    /// Quota preflight cut-off: a connection is skipped until its window resets.
    QuotaCutOff,
}

impl Role {
    /// Every role, in file order.
    pub const ALL: [Role; 17] = [
        Role::BreakerClosed,
        Role::BreakerDegraded,
        Role::BreakerOpen,
        Role::BreakerHalfOpen,
        Role::Cooling,
        Role::QuotaWait,
        Role::Terminal,
        Role::Lockout,
        Role::QueueFull,
        Role::Ok,
        Role::Error,
        Role::Muted,
        Role::Title,
        Role::Selection,
        Role::Border,
        Role::QuotaWarn,
        Role::QuotaCutOff,
    ];

    /// The role's key in a theme file, e.g. `breaker_half_open`.
    pub fn key(self) -> &'static str {
        match self {
            Role::BreakerClosed => "breaker_closed",
            Role::BreakerDegraded => "breaker_degraded",
            Role::BreakerOpen => "breaker_open",
            Role::BreakerHalfOpen => "breaker_half_open",
            Role::Cooling => "cooling",
            Role::QuotaWait => "quota_wait",
            Role::Terminal => "terminal",
            Role::Lockout => "lockout",
            Role::QueueFull => "queue_full",
            Role::Ok => "ok",
            Role::Error => "error",
            Role::Muted => "muted",
            Role::Title => "title",
            Role::Selection => "selection",
            Role::Border => "border",
            Role::QuotaWarn => "quota_warn",
            Role::QuotaCutOff => "quota_cut_off",
        }
    }

    fn from_key(key: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.key() == key)
    }
}

/// A resolved theme: one ratatui `Style` per [`Role`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Theme {
    /// Theme name (the file's `name`, else the name it was loaded by).
    pub name: String,
    styles: BTreeMap<Role, Style>,
}

impl Default for Theme {
    /// The embedded `default` theme, with colours.
    fn default() -> Self {
        // The embedded file is tested to parse; an unstyled theme is the harmless fallback.
        resolve("default", &[], false).unwrap_or_else(|_| Theme::plain())
    }
}

impl Theme {
    /// A theme with no styling at all (every role is `Style::default()`).
    pub fn plain() -> Self {
        Self {
            name: "plain".to_owned(),
            styles: BTreeMap::new(),
        }
    }

    /// The style of `role` (`Style::default()` when no theme in the chain sets it).
    pub fn style(&self, role: Role) -> Style {
        self.styles.get(&role).copied().unwrap_or_default()
    }

    /// Drops every colour, keeping modifiers; the selection becomes reversed so it stays visible.
    fn without_colour(mut self) -> Self {
        for (role, style) in &mut self.styles {
            let had_colour = style.fg.is_some() || style.bg.is_some();
            style.fg = None;
            style.bg = None;
            if *role == Role::Selection && had_colour {
                *style = style.add_modifier(Modifier::REVERSED);
            }
        }
        self.styles
            .entry(Role::Selection)
            .or_insert_with(|| Style::new().add_modifier(Modifier::REVERSED));
        self
    }
}

/// A theme that cannot be loaded; the message names the file, the key and a fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("theme error in {file}: `{key}`: {message} (fix: {fix})")]
pub struct ThemeError {
    /// The theme file (path, or `<embedded name>` for a built-in).
    pub file: String,
    /// Key path inside the file, e.g. `roles.error.fg`, or `console.theme` for a missing theme.
    pub key: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: String,
}

impl ThemeError {
    /// Re-labels an error about the requested theme itself as coming from the command-line
    /// `flag` (e.g. `--theme`) rather than from `console.theme` in the config; errors inside a
    /// theme file (or its parents) keep their file and key.
    pub fn for_flag(mut self, flag: &str) -> Self {
        if self.key == "console.theme" && self.file == "config" {
            self.file = "command line".to_owned();
            self.key = flag.to_owned();
        }
        self
    }

    fn new(file: &str, key: &str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            file: file.to_owned(),
            key: key.to_owned(),
            message: message.into(),
            fix: fix.into(),
        }
    }
}

/// Loads theme `name`: `<dir>/<name>.toml` from the first of `search_dirs` that has it, else a
/// built-in ([`BUILTIN`]). Honours `NO_COLOR` (set and non-empty: colours dropped, modifiers kept).
///
/// Errors: unknown name, unreadable file, TOML syntax, unknown key or role, bad colour, a parent
/// cycle or a chain longer than [`MAX_PARENT_DEPTH`].
pub fn load(name: &str, search_dirs: &[PathBuf]) -> Result<Theme, ThemeError> {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    load_with(name, search_dirs, no_color)
}

/// [`load`] with the `NO_COLOR` decision passed in (`no_color = true` drops all colours).
pub fn load_with(name: &str, search_dirs: &[PathBuf], no_color: bool) -> Result<Theme, ThemeError> {
    let theme = resolve(name, search_dirs, true)?;
    Ok(if no_color {
        theme.without_colour()
    } else {
        theme
    })
}

/// One parsed theme file, before parent resolution.
struct ThemeFile {
    origin: String,
    name: Option<String>,
    parent: Option<String>,
    roles: BTreeMap<Role, Style>,
}

fn resolve(name: &str, search_dirs: &[PathBuf], use_dirs: bool) -> Result<Theme, ThemeError> {
    let dirs = if use_dirs { search_dirs } else { &[] };
    let mut chain: Vec<ThemeFile> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut next = Some(name.to_owned());
    let mut implicit = false;
    while let Some(current) = next.take() {
        let referrer = chain.last().map_or("console.theme", |_| "parent");
        let referrer_file = chain
            .last()
            .map_or("config", |f| f.origin.as_str())
            .to_owned();
        if names.contains(&current) {
            names.push(current);
            return Err(ThemeError::new(
                &referrer_file,
                referrer,
                format!("parent chain has a cycle: {}", names.join(" → ")),
                "remove one `parent` so the chain ends",
            ));
        }
        if names.len() > MAX_PARENT_DEPTH && !implicit {
            names.push(current);
            return Err(ThemeError::new(
                &referrer_file,
                referrer,
                format!(
                    "parent chain deeper than {MAX_PARENT_DEPTH}: {}",
                    names.join(" → ")
                ),
                "inherit from a theme nearer the root (e.g. `default`)",
            ));
        }
        let file = find_and_parse(&current, dirs, &referrer_file, referrer)?;
        next = file.parent.clone();
        if next.is_none() && current != "default" && !names.iter().any(|n| n == "default") {
            next = Some("default".to_owned());
            implicit = true;
        }
        names.push(current);
        chain.push(file);
    }
    let mut styles = BTreeMap::new();
    for file in chain.iter().rev() {
        styles.extend(file.roles.iter().map(|(r, s)| (*r, *s)));
    }
    let display = chain
        .first()
        .and_then(|f| f.name.clone())
        .unwrap_or_else(|| name.to_owned());
    Ok(Theme {
        name: display,
        styles,
    })
}

fn find_and_parse(
    name: &str,
    dirs: &[PathBuf],
    referrer_file: &str,
    referrer: &str,
) -> Result<ThemeFile, ThemeError> {
    let bad_name = name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.');
    if !bad_name {
        for dir in dirs {
            let path = dir.join(format!("{name}.toml"));
            if path.is_file() {
                return read_file(&path);
            }
        }
        if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name) {
            return parse(&format!("<embedded {name}.toml>"), text);
        }
    }
    let searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let builtins: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
    Err(ThemeError::new(
        referrer_file,
        referrer,
        format!(
            "unknown theme `{name}` (searched: {})",
            if searched.is_empty() {
                "no directories".to_owned()
            } else {
                searched.join(", ")
            }
        ),
        format!(
            "create `{name}.toml` in a themes directory or use one of: {}",
            builtins.join(", ")
        ),
    ))
}

fn read_file(path: &Path) -> Result<ThemeFile, ThemeError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        ThemeError::new(
            &origin,
            "",
            format!("cannot read: {e}"),
            "check the file's permissions",
        )
    })?;
    parse(&origin, &text)
}

fn parse(origin: &str, text: &str) -> Result<ThemeFile, ThemeError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        ThemeError::new(
            origin,
            "",
            e.to_string().trim().to_owned(),
            "fix the TOML syntax",
        )
    })?;
    let mut file = ThemeFile {
        origin: origin.to_owned(),
        name: None,
        parent: None,
        roles: BTreeMap::new(),
    };
    for (key, value) in &table {
        match key.as_str() {
            "name" => file.name = Some(string_value(origin, key, value)?),
            "parent" => file.parent = Some(string_value(origin, key, value)?),
            "roles" => {
                let Some(roles) = value.as_table() else {
                    return Err(ThemeError::new(
                        origin,
                        key,
                        "must be a table",
                        "write `[roles]`",
                    ));
                };
                for (role_key, role_value) in roles {
                    let path = format!("roles.{role_key}");
                    let role = Role::from_key(role_key).ok_or_else(|| {
                        ThemeError::new(
                            origin,
                            &path,
                            "unknown role",
                            format!("use one of: {}", role_list()),
                        )
                    })?;
                    file.roles
                        .insert(role, style_value(origin, &path, role_value)?);
                }
            }
            _ => {
                return Err(ThemeError::new(
                    origin,
                    key,
                    "unknown key",
                    "a theme file has only `name`, `parent` and `[roles]`",
                ));
            }
        }
    }
    Ok(file)
}

fn role_list() -> String {
    Role::ALL
        .iter()
        .map(|r| r.key())
        .collect::<Vec<_>>()
        .join(", ")
}

fn string_value(origin: &str, key: &str, value: &toml::Value) -> Result<String, ThemeError> {
    value.as_str().map(str::to_owned).ok_or_else(|| {
        ThemeError::new(
            origin,
            key,
            "must be a string",
            format!("write `{key} = \"…\"`"),
        )
    })
}

fn style_value(origin: &str, path: &str, value: &toml::Value) -> Result<Style, ThemeError> {
    match value {
        toml::Value::String(s) => Ok(Style::new().fg(colour(origin, path, s)?)),
        toml::Value::Table(t) => {
            let mut style = Style::new();
            for (k, v) in t {
                let key = format!("{path}.{k}");
                match k.as_str() {
                    "fg" | "bg" => {
                        let text = string_value(origin, &key, v)?;
                        let c = colour(origin, &key, &text)?;
                        style = if k == "fg" { style.fg(c) } else { style.bg(c) };
                    }
                    "bold" | "italic" | "underline" | "dim" | "reverse" => {
                        let on = v.as_bool().ok_or_else(|| {
                            ThemeError::new(
                                origin,
                                &key,
                                "must be true or false",
                                format!("write `{k} = true`"),
                            )
                        })?;
                        let m = match k.as_str() {
                            "bold" => Modifier::BOLD,
                            "italic" => Modifier::ITALIC,
                            "underline" => Modifier::UNDERLINED,
                            "dim" => Modifier::DIM,
                            _ => Modifier::REVERSED,
                        };
                        style = if on {
                            style.add_modifier(m)
                        } else {
                            style.remove_modifier(m)
                        };
                    }
                    _ => {
                        return Err(ThemeError::new(
                            origin,
                            &key,
                            "unknown style key",
                            "use fg, bg, bold, italic, underline, dim or reverse",
                        ));
                    }
                }
            }
            Ok(style)
        }
        _ => Err(ThemeError::new(
            origin,
            path,
            "must be a colour string or a table",
            "write `\"red\"` or `{ fg = \"red\", bold = true }`",
        )),
    }
}

fn colour(origin: &str, key: &str, text: &str) -> Result<Color, ThemeError> {
    let valid_hex = text.len() == 7
        && text.starts_with('#')
        && text[1..].chars().all(|c| c.is_ascii_hexdigit());
    if text.starts_with('#') && !valid_hex {
        return Err(ThemeError::new(
            origin,
            key,
            format!("invalid colour `{text}`"),
            "write hex as `#rrggbb`",
        ));
    }
    text.parse::<Color>().map_err(|_| {
        ThemeError::new(
            origin,
            key,
            format!("invalid colour `{text}`"),
            "use a name (red, lightblue, darkgray, …), `#rrggbb` or an index 0–255",
        )
    })
}

#[cfg(test)]
#[path = "theme_prop.rs"]
mod prop;

#[cfg(test)]
#[path = "theme_tests.rs"]
mod tests;

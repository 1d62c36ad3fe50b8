use std::path::PathBuf;

use ratatui::style::{Color, Modifier, Style};

use super::*;

fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(format!("{name}.toml")), text).unwrap();
    }
    dir
}

fn shipped_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("themes")
}

#[test]
fn every_shipped_theme_loads_and_styles_every_role() {
    let dir = shipped_dir();
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let theme = load_with(&name, std::slice::from_ref(&dir), false)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            theme.name,
            name,
            "`name` in {} matches the file name",
            path.display()
        );
        for role in Role::ALL {
            assert_ne!(
                theme.style(role),
                Style::default(),
                "{name} leaves {} unstyled",
                role.key()
            );
        }
        seen += 1;
    }
    assert!(seen >= 3, "expected the three shipped themes, saw {seen}");
}

#[test]
fn builtins_load_without_any_directory() {
    for (name, _) in BUILTIN {
        let theme = load_with(name, &[], false).unwrap();
        assert_eq!(&theme.name, name);
    }
    assert_eq!(Theme::default().style(Role::Ok).fg, Some(Color::Green));
    assert_eq!(Theme::default().style(Role::Error).fg, Some(Color::Red));
}

#[test]
fn embedded_default_matches_the_file_on_disk() {
    let on_disk = std::fs::read_to_string(shipped_dir().join("default.toml")).unwrap();
    assert_eq!(on_disk, DEFAULT_TOML);
}

#[test]
fn parent_chain_resolves_nearest_first_then_default() {
    let dir = dir_with(&[
        (
            "base",
            "parent = \"default\"\n[roles]\nok = \"#010203\"\nmuted = \"white\"\n",
        ),
        (
            "mine",
            "name = \"Mine\"\nparent = \"base\"\n[roles]\nmuted = { fg = \"gray\", italic = true }\n",
        ),
    ]);
    let theme = load_with("mine", &[dir.path().to_path_buf()], false).unwrap();
    assert_eq!(theme.name, "Mine");
    assert_eq!(
        theme.style(Role::Muted),
        Style::new().fg(Color::Gray).add_modifier(Modifier::ITALIC)
    );
    assert_eq!(
        theme.style(Role::Ok).fg,
        Some(Color::Rgb(1, 2, 3)),
        "from parent"
    );
    assert_eq!(
        theme.style(Role::Error),
        Theme::default().style(Role::Error),
        "from default"
    );
}

#[test]
fn theme_without_parent_still_falls_back_to_default() {
    let dir = dir_with(&[("solo", "[roles]\nok = \"blue\"\n")]);
    let theme = load_with("solo", &[dir.path().to_path_buf()], false).unwrap();
    assert_eq!(theme.style(Role::Ok).fg, Some(Color::Blue));
    assert_eq!(theme.style(Role::Error).fg, Some(Color::Red));
}

#[test]
fn disk_file_overrides_builtin_of_same_name() {
    let dir = dir_with(&[("light", "[roles]\nok = \"magenta\"\n")]);
    let theme = load_with("light", &[dir.path().to_path_buf()], false).unwrap();
    assert_eq!(theme.style(Role::Ok).fg, Some(Color::Magenta));
}

#[test]
fn parent_cycle_is_an_error() {
    let dir = dir_with(&[("a", "parent = \"b\"\n"), ("b", "parent = \"a\"\n")]);
    let err = load_with("a", &[dir.path().to_path_buf()], false).unwrap_err();
    assert!(err.message.contains("cycle"), "{err}");
    assert!(err.message.contains("a → b → a"), "{err}");
    assert!(err.file.ends_with("b.toml"), "{err}");
    assert_eq!(err.key, "parent");
}

#[test]
fn too_deep_chain_is_an_error() {
    let dir = dir_with(&[
        ("t1", "parent = \"t2\"\n"),
        ("t2", "parent = \"t3\"\n"),
        ("t3", "parent = \"t4\"\n"),
        ("t4", "parent = \"t5\"\n"),
        ("t5", "parent = \"t6\"\n"),
        ("t6", "parent = \"default\"\n"),
    ]);
    let dirs = [dir.path().to_path_buf()];
    let err = load_with("t1", &dirs, false).unwrap_err();
    assert!(err.message.contains("deeper than 4"), "{err}");
    // Four parent links is allowed.
    assert!(load_with("t3", &dirs, false).is_ok());
}

#[test]
fn bad_colour_names_file_and_key() {
    let dir = dir_with(&[("broken", "[roles]\nerror = { fg = \"reddish\" }\n")]);
    let err = load_with("broken", &[dir.path().to_path_buf()], false).unwrap_err();
    assert!(err.file.ends_with("broken.toml"), "{err}");
    assert_eq!(err.key, "roles.error.fg");
    let text = err.to_string();
    assert!(
        text.contains("broken.toml") && text.contains("roles.error.fg") && text.contains("reddish"),
        "{text}"
    );
    assert!(text.contains("fix:"), "{text}");

    let dir = dir_with(&[("hex", "[roles]\nok = \"#12345\"\n")]);
    let err = load_with("hex", &[dir.path().to_path_buf()], false).unwrap_err();
    assert_eq!(err.key, "roles.ok");
    assert!(err.fix.contains("#rrggbb"), "{err}");
}

#[test]
fn unknown_role_key_and_style_key_are_errors() {
    let dir = dir_with(&[
        ("r", "[roles]\nbreaker_opn = \"red\"\n"),
        ("k", "colour = \"red\"\n"),
        ("s", "[roles]\nok = { fg = \"red\", blink = true }\n"),
        ("syntax", "[roles\n"),
    ]);
    let dirs = [dir.path().to_path_buf()];
    assert_eq!(
        load_with("r", &dirs, false).unwrap_err().key,
        "roles.breaker_opn"
    );
    assert_eq!(load_with("k", &dirs, false).unwrap_err().key, "colour");
    assert_eq!(
        load_with("s", &dirs, false).unwrap_err().key,
        "roles.ok.blink"
    );
    let err = load_with("syntax", &dirs, false).unwrap_err();
    assert!(
        err.file.ends_with("syntax.toml") && err.fix.contains("TOML"),
        "{err}"
    );
}

#[test]
fn unknown_theme_name_is_an_error() {
    let dir = dir_with(&[]);
    let err = load_with("nope", &[dir.path().to_path_buf()], false).unwrap_err();
    assert!(err.message.contains("unknown theme `nope`"), "{err}");
    assert_eq!(err.key, "console.theme");
    assert!(err.fix.contains("default, light, high-contrast"), "{err}");
    assert!(load_with("../etc/passwd", &[], false).is_err());
    let flag = err.clone().for_flag("--theme").to_string();
    assert!(
        flag.starts_with("theme error in command line: `--theme`: unknown theme `nope`"),
        "{flag}"
    );
    // A missing parent names the referring file.
    let dir = dir_with(&[("child", "parent = \"ghost\"\n")]);
    let err = load_with("child", &[dir.path().to_path_buf()], false).unwrap_err();
    assert!(
        err.file.ends_with("child.toml") && err.key == "parent",
        "{err}"
    );
    assert_eq!(
        err.clone().for_flag("--theme"),
        err,
        "a file's own error keeps its key"
    );
}

#[test]
fn no_color_drops_colours_but_keeps_modifiers() {
    let theme = load_with("default", &[], true).unwrap();
    for role in Role::ALL {
        let s = theme.style(role);
        assert_eq!((s.fg, s.bg), (None, None), "{} still coloured", role.key());
    }
    assert!(
        theme
            .style(Role::Error)
            .add_modifier
            .contains(Modifier::BOLD)
    );
    assert!(
        theme
            .style(Role::Selection)
            .add_modifier
            .contains(Modifier::REVERSED)
    );
    let coloured = load_with("default", &[], false).unwrap();
    assert_eq!(coloured.style(Role::Error).fg, Some(Color::Red));
}

//! Request history in the Requests panel: the newest log rows after a restart, PgDn / PgUp
//! paging through the log via a real `Control` and store, and the `/` filter on those rows.

use std::path::Path;
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tokio_util::sync::CancellationToken;

use crate::clock::ManualClock;
use crate::config::{LoadEnv, StoreConfig, from_str};
use crate::console::action::{HISTORY_PAGE, perform};
use crate::console::app::{App, Focus};
use crate::core::Core;
use crate::core::operator::control::Control;
use crate::store::{RequestLogRow, Store};

const CONFIG: &str = "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n";

/// A store holding `n` rows, oldest first: model `m<i>`, status 429 for every third row.
fn store_with(dir: &Path, n: u64) -> Arc<Store> {
    let store = Store::open(&StoreConfig {
        path: dir.join("s.db"),
        request_log_max_rows: 10_000,
        request_log_max_age: std::time::Duration::from_secs(365 * 86_400),
    })
    .unwrap();
    for i in 0..n {
        store.record_request(RequestLogRow {
            tokens_in: None,
            tokens_out: None,
            translated: String::new(),
            injected: false,
            continued: false,
            at_unix_ms: 1_700_000_000_000 + i,
            route: "/v1/messages".into(),
            client_model: format!("m{i}"),
            target: "p/x".into(),
            status: if i % 3 == 0 { 429 } else { 200 },
            latency_ms: 1,
            attempts: 1,
            bytes: 1,
            outcome: if i % 3 == 0 { "upstream_error" } else { "ok" }.into(),
        });
    }
    store.flush();
    Arc::new(store)
}

fn control(store: Arc<Store>) -> Control {
    let cfg = from_str(CONFIG, Path::new("t.toml"), &LoadEnv::fixed(&[], "/tmp")).unwrap();
    let core = Core::new(Arc::new(cfg), Arc::new(ManualClock::new()), Some(store));
    Control::new(core, CancellationToken::new())
}

fn press(app: &mut App, control: &Control, code: KeyCode) {
    if let Some(action) = app.on_key(KeyEvent::new(code, KeyModifiers::NONE)) {
        app.on_outcome(perform(control, action));
    }
}

fn models(app: &App) -> Vec<String> {
    app.snapshot
        .recent
        .iter()
        .map(|r| r.client_model.clone())
        .collect()
}

#[test]
fn requests_start_with_the_log_and_page_back_and_forth() {
    let dir = tempfile::tempdir().unwrap();
    let n = (HISTORY_PAGE * 2 + 10) as u64;
    let store = store_with(dir.path(), n);
    // After a restart: the newest rows, newest first (what `main` hands the console).
    let mut app = App::new(Arc::new(crate::snapshot::Snapshot::default()));
    app.set_history(crate::app::request_history(&store, HISTORY_PAGE));
    let control = control(store);
    app.focus = Focus::Requests;
    let live = models(&app);
    assert_eq!(
        live.first().map(String::as_str),
        Some(format!("m{}", n - 1).as_str())
    );
    assert!(!app.paging_history());

    press(&mut app, &control, KeyCode::PageDown);
    assert!(app.paging_history());
    assert_eq!(
        models(&app).len(),
        HISTORY_PAGE,
        "page 1: the newest log rows"
    );
    assert_eq!(models(&app)[0], format!("m{}", n - 1));
    press(&mut app, &control, KeyCode::PageDown);
    let page2 = models(&app);
    assert_eq!(
        page2[0],
        format!("m{}", n - 1 - HISTORY_PAGE as u64),
        "page 2 starts below page 1"
    );
    press(&mut app, &control, KeyCode::PageDown);
    assert_eq!(models(&app).len(), 10, "the last, short page");
    assert_eq!(models(&app).last().map(String::as_str), Some("m0"));
    press(&mut app, &control, KeyCode::PageDown);
    assert_eq!(models(&app).len(), 10, "nothing older: the page stays");
    let msg = app
        .message
        .as_ref()
        .map(|m| m.text.clone())
        .unwrap_or_default();
    assert!(msg.contains("no older requests"), "{msg}");

    press(&mut app, &control, KeyCode::PageUp);
    assert_eq!(models(&app), page2, "PgUp goes back a page");
    press(&mut app, &control, KeyCode::PageUp);
    press(&mut app, &control, KeyCode::PageUp);
    assert!(
        !app.paging_history(),
        "past the newest page: live rows again"
    );
    assert_eq!(models(&app), live);

    // The filter applies to log rows: by status and by outcome word.
    press(&mut app, &control, KeyCode::PageDown);
    app.set_filter("429");
    assert!(!app.snapshot.recent.is_empty());
    assert!(app.snapshot.recent.iter().all(|r| r.status == 429));
    app.set_filter("upstream_error");
    assert!(app.snapshot.recent.iter().all(|r| r.status == 429));
    app.set_filter("m7");
    assert!(
        app.snapshot
            .recent
            .iter()
            .all(|r| r.client_model.contains("m7"))
    );
}

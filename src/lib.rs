//! sluice: a local LLM proxy with provider resilience and a live terminal operator console.
//!
//! Module map (see `docs/ARCHITECTURE.md#layers`):
//! - **policy**: pure decisions (no I/O, no clock reads): [`policy`].
//! - **core**: the only writer of live state; publishes [`snapshot::Snapshot`]s (the plain
//!   view types, [`snapshot`]) and exposes [`core::control::Control`], the one door for
//!   operator actions.
//! - **proxy**: hyper server and client, request lifecycle, SSE relay, dialect errors: [`proxy`].
//! - **admin**: the loopback admin API: [`admin`].
//! - **store**: SQLite write-behind persistence on one thread: [`store`].
//! - **console**: the ratatui operator console: [`console`].
//! - **remote**: the console attached to a running sluice over the admin API, reading the
//!   SSE snapshot stream ([`snapshot::stream`]): [`remote`].
//! - **translate**: pure dialect translation (requests, responses, streams, errors): [`translate`].
//! - **wire**: the wire formats the proxy and translation share (dialect error types, SSE
//!   framing, body helpers): [`wire`].
//! - **cli**: the command line and its one-shot commands (`env`, `log`, `status`): [`cli`].
//! - support: [`config`], [`clock`], [`support`] (the request path's hash map, constant-time
//!   comparison, background threads' scheduling class, tracing setup), [`metrics`], [`app`]
//!   (wires everything together).
//!
//! A comment that cites "§N" (e.g. "§2 anti-herd rule") means section N of
//! `docs/RESILIENCE.md`, where each resilience rule is stated with its defaults.

pub mod admin;
pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod console;
pub mod core;
pub mod metrics;
pub mod policy;
pub mod proxy;
pub mod remote;
pub mod snapshot;
pub mod store;
pub mod support;
pub mod translate;
pub mod wire;

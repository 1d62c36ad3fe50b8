//! The inference routes a request can come on: which one, its path and its wire dialect.
//! Below every stage of the request path (the router in `routes.rs` matches them).

use crate::config::Dialect;
use crate::wire::dialect::SseKind;

/// The inference routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// `POST /v1/messages`
    Messages,
    /// `POST /v1/messages/count_tokens`
    CountTokens,
    /// `POST /v1/chat/completions`
    ChatCompletions,
    /// `POST /v1/responses`
    Responses,
    /// `GET /v1/models`
    Models,
}

impl RouteKind {
    /// Routes that never take admission permits (§4 caps): token counts and model lists are
    /// cheap and must not wait behind generations.
    pub fn admission_exempt(self) -> bool {
        matches!(self, Self::CountTokens | Self::Models)
    }
}

/// A matched inference route.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    /// Which route.
    pub kind: RouteKind,
    /// Its path, e.g. `/v1/messages`.
    pub path: &'static str,
    /// Its wire dialect.
    pub dialect: Dialect,
}

/// The POST routes, matched on the path only.
pub const ROUTES: [Route; 4] = [
    Route {
        kind: RouteKind::Messages,
        path: "/v1/messages",
        dialect: Dialect::Anthropic,
    },
    Route {
        kind: RouteKind::CountTokens,
        path: "/v1/messages/count_tokens",
        dialect: Dialect::Anthropic,
    },
    Route {
        kind: RouteKind::ChatCompletions,
        path: "/v1/chat/completions",
        dialect: Dialect::OpenAi,
    },
    Route {
        kind: RouteKind::Responses,
        path: "/v1/responses",
        dialect: Dialect::OpenAi,
    },
];

/// The dialect used for errors on `path` when no route matched.
pub fn dialect_for_path(path: &str, h: &http::HeaderMap) -> Dialect {
    if path.starts_with("/v1/messages")
        || path.starts_with("/v1/complete")
        || h.contains_key("anthropic-version")
    {
        Dialect::Anthropic
    } else {
        Dialect::OpenAi
    }
}

impl Route {
    /// The SSE format of this route's streams.
    pub fn sse_kind(&self) -> SseKind {
        match self.kind {
            RouteKind::Messages | RouteKind::CountTokens => SseKind::Anthropic,
            RouteKind::ChatCompletions | RouteKind::Models => SseKind::OpenAiChat,
            RouteKind::Responses => SseKind::OpenAiResponses,
        }
    }
}

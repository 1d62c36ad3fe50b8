//! Upstream clients (placeholder).
use crate::config::Config;
/// Clients per provider.
pub struct Upstreams;
impl Upstreams {
    /// Builds clients.
    pub fn new(_c: &Config) -> Result<Self, String> {
        Ok(Self)
    }
}

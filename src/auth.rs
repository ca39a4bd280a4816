//! Who is calling. Every request is authenticated before the MCP layer sees
//! it; the resulting [`Owner`] scopes every task operation.

use crate::http::HttpRequest;
use crate::tasks::record::Owner;
use crate::time::Millis;

/// How callers are identified.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Auth {
    /// Nothing configured: the server refuses to serve rather than serving
    /// everyone as one identity.
    #[default]
    Unconfigured,
    /// Local development only: every request acts as this owner, with no
    /// credentials checked. Enabled explicitly with `MCP_AUTH=insecure-local`
    /// and announced loudly by the adapters.
    InsecureLocal(Owner),
}

/// Why a request was not authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthError {
    /// The deployment has no authentication configured.
    NotConfigured,
}

impl Auth {
    /// The caller of `req` at `now`.
    pub fn authenticate(&self, _req: &HttpRequest<'_>, _now: Millis) -> Result<Owner, AuthError> {
        match self {
            Auth::Unconfigured => Err(AuthError::NotConfigured),
            Auth::InsecureLocal(owner) => Ok(owner.clone()),
        }
    }

    pub fn is_insecure(&self) -> bool {
        matches!(self, Auth::InsecureLocal(_))
    }
}

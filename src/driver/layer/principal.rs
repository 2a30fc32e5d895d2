//! Who is calling, as the layer learns it: from your auth layer first,
//! then from the configured tokens or trusted header.

use axum::http::{Extensions, HeaderMap};

use crate::driver::http::{ConfiguredPrincipals, PrincipalResolver};
use crate::scope::Principal;

/// Put this in a request's extensions (from your own auth layer, in front
/// of [`super::TasksCompatLayer`]) to name the caller: its 2025-11-25
/// sessions and tasks are then its own (`tasks/list` shows no one
/// else's). A bare [`Principal`] in the extensions counts the same.
///
/// ```
/// use mcp_tasks_shim::layer::AuthenticatedPrincipal;
/// use mcp_tasks_shim::scope::Principal;
///
/// let mut req = axum::http::Request::new(axum::body::Body::empty());
/// req.extensions_mut().insert(AuthenticatedPrincipal(Principal::new("alice")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedPrincipal(pub Principal);

/// The extension, else the configured resolver.
#[derive(Debug)]
pub(crate) struct LayerPrincipals(pub(crate) ConfiguredPrincipals);

impl PrincipalResolver for LayerPrincipals {
    fn authenticate(
        &self,
        headers: &HeaderMap,
        extensions: &Extensions,
    ) -> Result<Option<Principal>, String> {
        if let Some(AuthenticatedPrincipal(p)) = extensions.get() {
            return Ok(Some(p.clone()));
        }
        if let Some(p) = extensions.get::<Principal>() {
            return Ok(Some(p.clone()));
        }
        self.0.authenticate(headers, extensions)
    }
}

//! The caching hints of orca's lists (SEP-2549's `ttlMs` and `cacheScope`), for a client on
//! 2026-07-28: orca's own part says what `catalog.cache_ttl_ms` and `catalog.cache_scope` say
//! (public only when every caller sees the same lists), and each external server with a part in
//! the list lowers it to what it said of its own, less the age of orca's copy. A merged list is
//! never fresher, nor more shareable, than any of its parts.

use rmcp::model::{
    CacheScope, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult,
};
use rmcp::service::{RequestContext, RoleServer};

use super::{AppState, input_required};
use crate::external::CacheHint;

/// orca's own part of every list.
pub(super) fn own(state: &AppState) -> CacheHint {
    let catalog = &state.config.catalog;
    // A principal or role given tool search sees a list of its own.
    let alike = state.config.auth.lists_alike()
        && catalog.principals.is_empty()
        && catalog.roles.is_empty();
    CacheHint { ttl: catalog.cache_ttl, public: catalog.cache_public && alike }
}

/// A list result whose hints can be set.
pub(super) trait Hinted {
    fn hints(&mut self) -> (&mut Option<u64>, &mut Option<CacheScope>);
}

macro_rules! hinted {
    ($($result:ty),*) => {$(
        impl Hinted for $result {
            fn hints(&mut self) -> (&mut Option<u64>, &mut Option<CacheScope>) {
                (&mut self.ttl_ms, &mut self.cache_scope)
            }
        }
    )*};
}

hinted!(ListToolsResult, ListPromptsResult, ListResourcesResult, ListResourceTemplatesResult);

/// `result` with its hint, worked out only for a client on 2026-07-28; older clients get the
/// shape they know.
pub(super) fn with<R: Hinted>(
    mut result: R,
    hint: impl FnOnce() -> CacheHint,
    context: &RequestContext<RoleServer>,
) -> R {
    if input_required::translates(context) {
        let (ttl, scope) = hint().wire();
        let (ttl_ms, cache_scope) = result.hints();
        *ttl_ms = Some(ttl);
        *cache_scope = Some(scope);
    }
    result
}

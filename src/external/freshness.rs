//! How long a list stays fresh and who may share it (SEP-2549's `ttlMs` and `cacheScope`): what
//! each external server said of its own lists, kept with the time orca listed them, and what a
//! merged list may say, which is never more than any of its parts.
//!
//! # Design notes
//!
//! `freshness.rs`: SEP-2549's hints. `Freshness` is what a server said of one list (the shortest
//! `ttlMs` of its pages, `public` only when all are), kept with the time orca listed it;
//! `all_pages` reads a list page by page with it (instead of rmcp's `list_all_*`); each `Catalog`
//! carries one per list, and the supervising loop lists a server again when one goes stale.
//! `CacheHint::and` is how a merged list combines its parts: the least time, public only when all
//! are. `ExternalServers::cache_hint` gives the servers' part of a list, and `gateway/hints.rs`
//! adds orca's own (`catalog.cache_*`, public only when `AuthConfig::lists_alike`) and sets them on
//! a 2026-07-28 client's list results.

use std::time::{Duration, Instant};

use rmcp::model::{
    CacheScope, Cursor, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, Prompt, Resource, ResourceTemplate, Tool,
};
use rmcp::service::ServiceError;

/// A merged list's hint: the shortest freshness of its parts, public only when all are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CacheHint {
    pub(crate) ttl: Duration,
    pub(crate) public: bool,
}

impl CacheHint {
    /// What a list without parts may say: it bounds nothing.
    pub(crate) const UNBOUNDED: CacheHint = CacheHint { ttl: Duration::MAX, public: true };

    /// Immediately stale and private: what a part that says nothing is taken to say.
    pub(crate) const NONE: CacheHint = CacheHint { ttl: Duration::ZERO, public: false };

    /// The hint of a list holding both parts.
    #[must_use]
    pub(crate) fn and(self, other: CacheHint) -> CacheHint {
        CacheHint { ttl: self.ttl.min(other.ttl), public: self.public && other.public }
    }

    /// The wire's values: milliseconds, and the scope.
    pub(crate) fn wire(self) -> (u64, CacheScope) {
        let ttl = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        (ttl, if self.public { CacheScope::Public } else { CacheScope::Private })
    }
}

/// What a server said of one of its lists, as orca last listed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Freshness {
    /// `None`: the server gave no hint (a 2025 revision, or a page without one).
    ttl: Option<Duration>,
    public: bool,
    listed: Instant,
}

impl Freshness {
    /// A list orca has not read from the server, or read without any hint.
    pub(crate) fn unknown() -> Freshness {
        Freshness { ttl: None, public: false, listed: Instant::now() }
    }

    /// The hint of a list read now in pages, each with its own `ttlMs` and `cacheScope`: the
    /// shortest time, public only when every page is, nothing when any page said nothing.
    pub(crate) fn of_pages(pages: &[PageHint]) -> Freshness {
        let mut ttl = Some(Duration::MAX);
        let mut public = !pages.is_empty();
        for (page_ttl, scope) in pages {
            ttl = match (ttl, page_ttl) {
                (Some(so_far), Some(page)) => Some(so_far.min(Duration::from_millis(*page))),
                _ => None,
            };
            public &= *scope == Some(CacheScope::Public);
        }
        let ttl = if pages.is_empty() { None } else { ttl };
        Freshness { ttl, public: public && ttl.is_some(), listed: Instant::now() }
    }

    /// What is left of it at `now`: the server's time less the age of orca's copy.
    pub(crate) fn at(self, now: Instant) -> CacheHint {
        match self.ttl {
            None => CacheHint::NONE,
            Some(ttl) => CacheHint {
                ttl: ttl.saturating_sub(now.saturating_duration_since(self.listed)),
                public: self.public,
            },
        }
    }

    /// When orca's copy goes stale by the server's word, if the server gave it a lifetime; orca
    /// lists again then, at most once a second.
    pub(crate) fn stale_at(self) -> Option<Instant> {
        let ttl = self.ttl.filter(|ttl| !ttl.is_zero())?;
        Some(self.listed + ttl.max(Duration::from_secs(1)))
    }
}

/// The lists a server may have a part in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    Tools,
    Prompts,
    Resources,
    Templates,
}

/// The freshness of each list of a server, as orca last listed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListsFreshness {
    pub(crate) tools: Freshness,
    pub(crate) prompts: Freshness,
    pub(crate) resources: Freshness,
    pub(crate) templates: Freshness,
}

impl Default for ListsFreshness {
    fn default() -> ListsFreshness {
        let unknown = Freshness::unknown();
        ListsFreshness { tools: unknown, prompts: unknown, resources: unknown, templates: unknown }
    }
}

impl ListsFreshness {
    pub(crate) fn of(&self, kind: ListKind) -> Freshness {
        match kind {
            ListKind::Tools => self.tools,
            ListKind::Prompts => self.prompts,
            ListKind::Resources => self.resources,
            ListKind::Templates => self.templates,
        }
    }

    /// The earliest time one of the lists goes stale by the server's word.
    pub(crate) fn stale_at(&self) -> Option<Instant> {
        [self.tools, self.prompts, self.resources, self.templates]
            .into_iter()
            .filter_map(Freshness::stale_at)
            .min()
    }

    /// Which lists are stale at `now`: (tools, prompts, resources and their templates).
    pub(crate) fn stale(&self, now: Instant) -> (bool, bool, bool) {
        let stale = |fresh: Freshness| fresh.stale_at().is_some_and(|at| at <= now);
        (stale(self.tools), stale(self.prompts), stale(self.resources) || stale(self.templates))
    }
}

/// A page's own hint: its `ttlMs` and `cacheScope`, as sent.
pub(crate) type PageHint = (Option<u64>, Option<CacheScope>);

/// One page of a list result: its items, the cursor of the next page, and its hint.
pub(crate) trait Paged {
    type Item;
    fn split(self) -> (Vec<Self::Item>, Option<Cursor>, PageHint);
}

macro_rules! paged {
    ($($result:ty => $items:ident: $item:ty),* $(,)?) => {$(
        impl Paged for $result {
            type Item = $item;
            fn split(self) -> (Vec<$item>, Option<Cursor>, PageHint) {
                (self.$items, self.next_cursor, (self.ttl_ms, self.cache_scope))
            }
        }
    )*};
}

paged! {
    ListToolsResult => tools: Tool,
    ListPromptsResult => prompts: Prompt,
    ListResourcesResult => resources: Resource,
    ListResourceTemplatesResult => resource_templates: ResourceTemplate,
}

/// Every page of a list, read one after the other from `page`, and the freshness they give.
///
/// # Errors
///
/// The first page that fails.
pub(crate) async fn all_pages<R: Paged, F: Future<Output = Result<R, ServiceError>>>(
    mut page: impl FnMut(PaginatedRequestParams) -> F,
) -> Result<(Vec<R::Item>, Freshness), ServiceError> {
    let mut items = Vec::new();
    let mut hints = Vec::new();
    let mut cursor = None;
    loop {
        let (mut more, next, hint) =
            page(PaginatedRequestParams::default().with_cursor(cursor)).await?.split();
        items.append(&mut more);
        hints.push(hint);
        cursor = next;
        if cursor.is_none() {
            return Ok((items, Freshness::of_pages(&hints)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_without_hints_is_immediately_stale_and_private() {
        let now = Instant::now();
        assert_eq!(Freshness::unknown().at(now), CacheHint::NONE);
        assert_eq!(Freshness::of_pages(&[]).at(now), CacheHint::NONE);
        let one_silent_page =
            Freshness::of_pages(&[(Some(60_000), Some(CacheScope::Public)), (None, None)]);
        assert_eq!(one_silent_page.at(now), CacheHint::NONE);
        assert_eq!(one_silent_page.stale_at(), None);
    }

    #[test]
    fn pages_give_their_shortest_time_and_are_public_only_together() {
        let fresh = Freshness::of_pages(&[
            (Some(60_000), Some(CacheScope::Public)),
            (Some(30_000), Some(CacheScope::Public)),
        ]);
        let hint = fresh.at(fresh.listed);
        assert_eq!(hint, CacheHint { ttl: Duration::from_secs(30), public: true });
        let mixed = Freshness::of_pages(&[
            (Some(60_000), Some(CacheScope::Public)),
            (Some(60_000), Some(CacheScope::Private)),
        ]);
        assert!(!mixed.at(mixed.listed).public);
    }

    #[test]
    fn a_copy_ages_and_goes_stale() {
        let fresh = Freshness::of_pages(&[(Some(10_000), Some(CacheScope::Public))]);
        let later = fresh.listed + Duration::from_secs(4);
        assert_eq!(fresh.at(later).ttl, Duration::from_secs(6));
        assert_eq!(fresh.at(fresh.listed + Duration::from_secs(11)).ttl, Duration::ZERO);
        assert_eq!(fresh.stale_at(), Some(fresh.listed + Duration::from_secs(10)));
        let tiny = Freshness::of_pages(&[(Some(5), None)]);
        assert_eq!(tiny.stale_at(), Some(tiny.listed + Duration::from_secs(1)));
        assert_eq!(Freshness::of_pages(&[(Some(0), None)]).stale_at(), None);
    }

    #[test]
    fn a_merged_list_says_no_more_than_any_part() {
        let long = CacheHint { ttl: Duration::from_secs(60), public: true };
        let short = CacheHint { ttl: Duration::from_secs(5), public: false };
        assert_eq!(long.and(short), CacheHint { ttl: Duration::from_secs(5), public: false });
        assert_eq!(long.and(long).wire(), (60_000, CacheScope::Public));
        assert_eq!(short.wire(), (5_000, CacheScope::Private));
    }
}

//! `catalog:` in `orca.yaml`: when `tools/list` offers tool search (`search_tools` and
//! `call_tool`) instead of every tool.

use serde::Deserialize;

/// When search replaces the full list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CatalogConfig {
    /// Search is offered when the caller may see more tools than this.
    pub(crate) search_above: usize,
    /// Principals (API key names, token users) who always get search, whatever the count.
    pub(crate) principals: Vec<String>,
    /// Roles (`auth.roles`) whose holders always get search.
    pub(crate) roles: Vec<String>,
}

impl Default for CatalogConfig {
    fn default() -> CatalogConfig {
        CatalogConfig { search_above: 40, principals: Vec::new(), roles: Vec::new() }
    }
}

/// `catalog:` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCatalog {
    search_above: Option<u64>,
    #[serde(default)]
    principals: Vec<String>,
    #[serde(default)]
    roles: Vec<String>,
}

impl RawCatalog {
    /// The section checked; `variable` is `ORCA_CATALOG_SEARCH_ABOVE`, used when the file does
    /// not set `search_above`.
    pub(super) fn validate(
        self,
        variable: Option<&str>,
        file: &str,
        errors: &mut Vec<String>,
    ) -> CatalogConfig {
        let defaults = CatalogConfig::default();
        let search_above = match (self.search_above, variable) {
            (Some(count), _) => usize::try_from(count).unwrap_or(usize::MAX),
            (None, Some(text)) => text.trim().parse().unwrap_or_else(|_| {
                errors
                    .push(format!("ORCA_CATALOG_SEARCH_ABOVE: `{text}` is not a number of tools"));
                defaults.search_above
            }),
            (None, None) => defaults.search_above,
        };
        for (key, names) in [("principals", &self.principals), ("roles", &self.roles)] {
            if let Some(index) = names.iter().position(|name| name.trim().is_empty()) {
                errors.push(format!("{file}: catalog.{key}[{index}]: a name may not be empty"));
            }
        }
        CatalogConfig { search_above, principals: self.principals, roles: self.roles }
    }
}

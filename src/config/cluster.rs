//! `cluster:` in `orca.yaml`: where the other replicas reach this one (`advertise_url`, or the
//! environment's `ORCA_ADVERTISE_URL`, which wins). Unset: one replica, as orca alone is.

use schemars::JsonSchema;
use serde::Deserialize;

/// `cluster:` section: how replicas sharing one state database find each other.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Cluster")]
pub(super) struct RawCluster {
    /// Where the other replicas reach this one (`http(s)://host[:port]`, no path);
    /// `ORCA_ADVERTISE_URL` wins. Unset: one replica alone.
    advertise_url: Option<String>,
}

/// Where the other replicas reach this one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ClusterConfig {
    /// `scheme://host[:port]`, no path: the replicas forward to `<advertise_url>/mcp`.
    pub(crate) advertise_url: Option<String>,
}

impl RawCluster {
    pub(super) fn validate(
        self,
        from_env: Option<&str>,
        file: &str,
        errors: &mut Vec<String>,
    ) -> ClusterConfig {
        let (written, key) = match from_env.filter(|url| !url.trim().is_empty()) {
            Some(url) => (Some(url.trim().to_owned()), "ORCA_ADVERTISE_URL".to_owned()),
            None => (self.advertise_url, format!("{file}: cluster.advertise_url")),
        };
        let Some(written) = written else { return ClusterConfig::default() };
        match url::Url::parse(&written) {
            Ok(url)
                if matches!(url.scheme(), "http" | "https")
                    && url.host_str().is_some_and(|host| !host.is_empty())
                    && matches!(url.path(), "" | "/")
                    && url.query().is_none()
                    && url.username().is_empty()
                    && url.password().is_none() =>
            {
                ClusterConfig { advertise_url: Some(written.trim_end_matches('/').to_owned()) }
            }
            _ => {
                errors.push(format!(
                    "{key}: `{written}` must be http(s)://host[:port], the address the other replicas reach this one at, with no path, query or user"
                ));
                ClusterConfig::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_advertised_address_is_an_origin_and_the_environment_wins() {
        let check = |raw: Option<&str>, env: Option<&str>| {
            let mut errors = Vec::new();
            let config = RawCluster { advertise_url: raw.map(str::to_owned) }.validate(
                env,
                "orca.yaml",
                &mut errors,
            );
            (config.advertise_url, errors)
        };
        assert_eq!(check(None, None), (None, vec![]));
        assert_eq!(
            check(Some("http://10.0.0.5:9000/"), None).0.as_deref(),
            Some("http://10.0.0.5:9000")
        );
        assert_eq!(check(Some("http://a:1"), Some("http://b:2")).0.as_deref(), Some("http://b:2"));
        for bad in ["10.0.0.5:9000", "ftp://a", "http://a/mcp", "http://u:p@a", "http://a?x=1"] {
            let (url, errors) = check(Some(bad), None);
            assert!(url.is_none() && errors.len() == 1, "{bad}: {errors:?}");
            assert!(errors[0].contains("cluster.advertise_url"), "{errors:?}");
        }
    }
}

//! Who is calling and what they may do: the `Principal` of a call (its verbs, its tools, its
//! rate, and for a token its client and roles), API keys, and the `auth:` section of
//! `orca.yaml` read into `AuthConfig` (keys, the stdio and anonymous principals, OAuth, roles).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::oauth::{self, OAuthConfig, Role};
use super::policy::ToolPolicy;
use super::raw::{RawApiKey, RawAuth, RawPrincipal};
use super::validate_verbs;
use crate::tool::Verb;

/// Who is calling, and what they may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Principal {
    /// The user: an API key's name, the stdio or anonymous principal's name, or a token's user
    /// claim (`sub`).
    pub(crate) name: String,
    pub(crate) verbs: BTreeSet<Verb>,
    /// The tools it may see and call: those some policy admits; `None`: every tool. The
    /// policies are its roles' own, shared (the gateway keeps each set's visible tools under
    /// them).
    pub(crate) tools: Option<Arc<[Arc<ToolPolicy>]>>,
    /// Tool calls a minute it may make (per replica); `None`: no limit.
    pub(crate) calls_per_minute: Option<u32>,
    /// The OAuth client the call came through (a token's `client_id`, else `azp`); `None` for
    /// API keys, stdio and anonymous callers.
    pub(crate) client: Option<String>,
    /// The roles of `auth.roles` that gave a token its verbs, in the token's order, joined with
    /// `,`; `None` for API keys, stdio and anonymous callers, and for a token holding none.
    pub(crate) role: Option<String>,
    /// The masking applied to every value it reads, from its roles (`privacy::combine`);
    /// `None`: nothing is masked.
    pub(crate) masking: Option<Arc<crate::privacy::mask::MaskingPolicy>>,
    /// The issuer of the token it came with; `None` for API keys, stdio and anonymous callers.
    pub(crate) issuer: Option<String>,
    /// Whether it may approve external tools held for a person (a role's `approve_tools`).
    pub(crate) approve_tools: bool,
    /// How it authenticated, which with `name` (and `issuer`) makes its [`Principal::identity`].
    pub(crate) kind: PrincipalKind,
}

/// How a principal authenticated. Two principals of the same name are one owner only when they
/// are also of one kind (and, for tokens, one issuer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum PrincipalKind {
    /// An API key of `auth.api_keys` (the name is the key's).
    #[default]
    ApiKey,
    /// An OAuth access token (the name is its user claim, `issuer` its issuer).
    Token,
    /// The stdio principal (`auth.stdio`), and the person at `orca`'s command line.
    Stdio,
    /// The anonymous HTTP caller of an orca without keys (`auth.anonymous`).
    Anonymous,
}

impl Principal {
    /// A principal with `verbs`, every tool and no rate limit.
    pub(crate) fn new(name: impl Into<String>, verbs: BTreeSet<Verb>) -> Principal {
        Principal {
            name: name.into(),
            verbs,
            tools: None,
            calls_per_minute: None,
            client: None,
            role: None,
            masking: None,
            issuer: None,
            approve_tools: false,
            kind: PrincipalKind::ApiKey,
        }
    }

    /// Who owns what it makes (confirmation tokens, approvals, tasks, input rounds, console
    /// rows, rate-limit counts): `key:<name>` for an API key, `token:<issuer>#<sub>` for a
    /// token (the issuer is a URL without a fragment, so the first `#` ends it), `stdio:<name>`
    /// and `anonymous:<name>`. A token user named like an API key is not its owner. Only ever
    /// compared and stored, never shown: what is shown is `name`.
    pub(crate) fn identity(&self) -> String {
        match self.kind {
            PrincipalKind::ApiKey => format!("key:{}", self.name),
            PrincipalKind::Token => {
                format!("token:{}#{}", self.issuer.as_deref().unwrap_or_default(), self.name)
            }
            PrincipalKind::Stdio => format!("stdio:{}", self.name),
            PrincipalKind::Anonymous => format!("anonymous:{}", self.name),
        }
    }

    /// Its stable identity as an orca user, under which its own sign-ins to external servers
    /// are kept: `oauth:<issuer>#<sub>` for a token, `principal:<name>` for an API key's, the
    /// stdio or the anonymous principal (so an API key and the stdio principal of the same
    /// name are one user).
    pub(crate) fn user_identity(&self) -> String {
        match &self.issuer {
            Some(issuer) => format!("oauth:{issuer}#{}", self.name),
            None => format!("principal:{}", self.name),
        }
    }

    pub(crate) fn may(&self, verb: Verb) -> bool {
        self.verbs.contains(&verb)
    }

    /// What decides which tools it may see: its verbs and its tool policies.
    pub(crate) fn tool_access(&self) -> ToolAccess {
        ToolAccess { verbs: self.verbs.clone(), policies: self.tools.clone() }
    }

    /// Whether its tool policy may admit a tool of `server`, whose tools are exposed under
    /// `prefix`, before they are known (`ToolPolicy::could_admit_a_tool_of`); with no policy,
    /// every server.
    pub(crate) fn may_reach_server(&self, server: &str, prefix: &str) -> bool {
        self.tools.as_ref().is_none_or(|policies| {
            policies.iter().any(|policy| policy.could_admit_a_tool_of(server, prefix))
        })
    }

    /// Whether its tool policy admits `tool` of `server` (verbs aside).
    pub(crate) fn may_use(&self, tool: &str, server: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|policies| policies.iter().any(|policy| policy.admits(tool, server)))
    }

    /// A principal holding `roles`: their verbs together, the tools any of them admits, the
    /// most generous rate limit (none when one of them has none), and their masking (none
    /// when one of them masks nothing; else every column any of them masks).
    pub(crate) fn with_roles<'a>(
        name: impl Into<String>,
        roles: impl IntoIterator<Item = &'a Role>,
    ) -> Principal {
        let mut principal = Principal::new(name, BTreeSet::new());
        let mut policies = Some(Vec::new());
        let mut limit = Some(0u32);
        let mut any = false;
        let mut masking = Vec::new();
        for role in roles {
            any = true;
            masking.push(role.masking.clone());
            principal.approve_tools |= role.approve_tools;
            principal.verbs.extend(role.verbs.iter().copied());
            match (&mut policies, &role.tools) {
                (Some(list), Some(policy)) => list.push(Arc::clone(policy)),
                (_, None) => policies = None,
                (None, Some(_)) => {}
            }
            limit = match (limit, role.calls_per_minute) {
                (Some(most), Some(this)) => Some(most.max(this)),
                _ => None,
            };
        }
        principal.tools = policies.map(Into::into);
        principal.calls_per_minute = if any { limit } else { None };
        principal.masking = crate::privacy::combine(masking);
        principal
    }
}

/// What decides which tools a principal may see and call: its verbs and its tool policies
/// (the roles' own, shared). It holds the policies, so another policy never takes one's place
/// at the same address while it is kept.
#[derive(Debug, Clone)]
pub(crate) struct ToolAccess {
    verbs: BTreeSet<Verb>,
    policies: Option<Arc<[Arc<ToolPolicy>]>>,
}

impl ToolAccess {
    /// Whether `principal` sees exactly the tools of this access: the same verbs and the same
    /// policies (the very same, in the same order; a principal holding the same roles in
    /// another order is another access, which sees the same tools).
    pub(crate) fn is_of(&self, principal: &Principal) -> bool {
        self.verbs == principal.verbs
            && match (&self.policies, &principal.tools) {
                (None, None) => true,
                (Some(mine), Some(theirs)) => {
                    Arc::ptr_eq(mine, theirs)
                        || (mine.len() == theirs.len()
                            && mine.iter().zip(theirs.iter()).all(|(a, b)| Arc::ptr_eq(a, b)))
                }
                _ => false,
            }
    }
}

/// An HTTP API key: only the SHA-256 of the key is kept.
#[derive(Debug, Clone)]
pub(crate) struct ApiKey {
    pub(crate) sha256: [u8; 32],
    pub(crate) principal: Principal,
    /// The role it holds (`role:`), whose masking it gets once salted.
    pub(crate) role: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct AuthConfig {
    pub(crate) api_keys: Vec<ApiKey>,
    pub(crate) stdio: Principal,
    pub(crate) anonymous: Principal,
    /// Bearer JWTs from this issuer are accepted next to the API keys.
    pub(crate) oauth: Option<OAuthConfig>,
    /// What each role named by a token's roles claim may do.
    pub(crate) roles: BTreeMap<String, Role>,
}

impl AuthConfig {
    /// Whether HTTP callers must authenticate (API keys or OAuth are configured).
    pub(crate) fn required(&self) -> bool {
        !self.api_keys.is_empty() || self.oauth.is_some()
    }

    /// Whether every HTTP caller sees the same lists: without authentication all are the
    /// anonymous caller; with it, no roles come from tokens and every API key has the same verbs
    /// and no tool policy. Only then may a list be shared across callers (`cacheScope: public`).
    /// (The stdio caller is alone on its connection: nothing shares what it is told.)
    pub(crate) fn lists_alike(&self) -> bool {
        if !self.required() {
            return true;
        }
        if self.oauth.is_some() || !self.roles.is_empty() {
            return false;
        }
        let mut keys = self.api_keys.iter().map(|key| &key.principal);
        let Some(first) = keys.next() else { return true };
        first.tools.is_none()
            && keys.all(|principal| principal.tools.is_none() && principal.verbs == first.verbs)
    }

    /// Fills the salt of each role's masking policy (`salt` of the policy id, from the orca
    /// secret, as `preview_masked` salts the same policy) and gives API keys with a role the
    /// salted policy.
    pub(crate) fn salt_masking(&mut self, salt: impl Fn(&str) -> String) {
        for role in self.roles.values_mut() {
            if let Some(policy) = &role.masking {
                let mut salted = (**policy).clone();
                salted.salt = salt(&salted.id);
                role.masking = Some(Arc::new(salted));
            }
        }
        for key in &mut self.api_keys {
            if let Some(role) = key.role.as_ref().and_then(|role| self.roles.get(role)) {
                key.principal.masking = role.masking.clone();
            }
        }
    }
}

fn validate_principal(
    raw: Option<RawPrincipal>,
    (default_name, kind): (&str, PrincipalKind),
    key: &str,
    file: &str,
    errors: &mut Vec<String>,
) -> Principal {
    let raw = raw.unwrap_or(RawPrincipal { name: None, verbs: None });
    let verbs = match raw.verbs {
        None => Verb::ALL.into_iter().collect(),
        Some(verbs) => validate_verbs(&verbs, &format!("{key}.verbs"), file, errors),
    };
    let name = raw.name.unwrap_or_else(|| default_name.to_owned());
    if name.trim().is_empty() {
        errors.push(format!("{file}: {key}.name: must not be empty"));
    }
    let mut principal = Principal::new(name, verbs);
    principal.kind = kind;
    principal
}

pub(super) fn validate_auth(
    raw: RawAuth,
    masking: &BTreeMap<String, BTreeMap<String, crate::privacy::mask::MaskRule>>,
    file: &str,
    errors: &mut Vec<String>,
) -> AuthConfig {
    let roles = oauth::validate_roles(raw.roles, masking, file, errors);
    let mut api_keys = Vec::new();
    let mut names = BTreeSet::new();
    let mut hashes = BTreeSet::new();
    for (index, RawApiKey { name, sha256, verbs, role }) in raw.api_keys.into_iter().enumerate() {
        let key = format!("auth.api_keys[{index}]");
        if name.trim().is_empty() {
            errors.push(format!("{file}: {key}.name: must not be empty"));
        } else if !names.insert(name.clone()) {
            errors.push(format!("{file}: {key}.name: `{name}` is used by another key"));
        }
        let digest = match hex::decode(sha256.trim()) {
            Ok(bytes) if bytes.len() == 32 => {
                let mut digest = [0u8; 32];
                digest.copy_from_slice(&bytes);
                if !hashes.insert(digest) {
                    errors.push(format!("{file}: {key}.sha256: the same key hash appears twice"));
                }
                digest
            }
            _ => {
                errors.push(format!(
                    "{file}: {key}.sha256: expected 64 hex characters, the SHA-256 of the key (`orca key new` prints one)"
                ));
                [0u8; 32]
            }
        };
        let key_role = role.clone();
        let principal = match (role, verbs) {
            (Some(role), None) => match roles.get(&role) {
                Some(found) => {
                    let mut principal = Principal::with_roles(name, [found]);
                    principal.role = Some(role);
                    principal
                }
                None => {
                    errors.push(format!(
                        "{file}: {key}.role: `{role}` is not one of auth.roles ({})",
                        roles.keys().cloned().collect::<Vec<_>>().join(", ")
                    ));
                    Principal::new(name, BTreeSet::new())
                }
            },
            (Some(_), Some(_)) => {
                errors.push(format!(
                    "{file}: {key}: give either verbs or a role (whose verbs the key gets), not both"
                ));
                Principal::new(name, BTreeSet::new())
            }
            (None, verbs) => {
                let verbs = verbs.unwrap_or_default();
                if verbs.is_empty() {
                    errors.push(format!(
                        "{file}: {key}.verbs: list at least one of read, create, update, delete (or give a role)"
                    ));
                }
                Principal::new(name, validate_verbs(&verbs, &format!("{key}.verbs"), file, errors))
            }
        };
        api_keys.push(ApiKey { sha256: digest, principal, role: key_role });
    }
    let oauth = raw.oauth.and_then(|raw| oauth::validate_oauth(raw, file, errors));
    if !roles.is_empty() && oauth.as_ref().is_some_and(|oauth| oauth.roles_claim.is_none()) {
        errors.push(format!(
            "{file}: auth.roles: a token's roles come from a claim: set auth.oauth.roles_claim (for example `groups`)"
        ));
    }
    AuthConfig {
        api_keys,
        stdio: validate_principal(
            raw.stdio,
            ("local", PrincipalKind::Stdio),
            "auth.stdio",
            file,
            errors,
        ),
        anonymous: validate_principal(
            raw.anonymous,
            ("anonymous", PrincipalKind::Anonymous),
            "auth.anonymous",
            file,
            errors,
        ),
        oauth,
        roles,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_of_one_name_differ_by_how_it_authenticated() {
        let of = |kind: PrincipalKind, issuer: Option<&str>| {
            let mut principal = Principal::new("bob", BTreeSet::new());
            principal.kind = kind;
            principal.issuer = issuer.map(str::to_owned);
            principal.identity()
        };
        let identities = [
            of(PrincipalKind::ApiKey, None),
            of(PrincipalKind::Token, Some("https://login.example.com")),
            of(PrincipalKind::Token, Some("https://other.example.com")),
            of(PrincipalKind::Stdio, None),
            of(PrincipalKind::Anonymous, None),
        ];
        assert_eq!(identities[0], "key:bob");
        assert_eq!(identities[1], "token:https://login.example.com#bob");
        let distinct: BTreeSet<&String> = identities.iter().collect();
        assert_eq!(distinct.len(), identities.len(), "{identities:?}");
        // A key whose name looks like a token's identity is still a key.
        let mut key = Principal::new("token:https://login.example.com#bob", BTreeSet::new());
        key.kind = PrincipalKind::ApiKey;
        assert_ne!(key.identity(), identities[1]);
    }

    fn policy(entries: &[&str]) -> Arc<ToolPolicy> {
        let entries: Vec<String> = entries.iter().map(|entry| (*entry).to_owned()).collect();
        Arc::new(ToolPolicy::parse(&entries).unwrap())
    }

    fn holding(verbs: &[Verb], policies: Option<Vec<Arc<ToolPolicy>>>) -> Principal {
        let mut principal = Principal::new("someone", verbs.iter().copied().collect());
        principal.tools = policies.map(Into::into);
        principal
    }

    #[test]
    fn a_tool_access_is_the_same_verbs_and_the_very_same_policies() {
        let analyst = policy(&["*", "!execute_sql"]);
        let auditor = policy(&["server:orca"]);
        let kept =
            holding(&[Verb::Read], Some(vec![analyst.clone(), auditor.clone()])).tool_access();
        for (principal, same) in [
            (holding(&[Verb::Read], Some(vec![analyst.clone(), auditor.clone()])), true),
            (
                holding(&[Verb::Read, Verb::Create], Some(vec![analyst.clone(), auditor.clone()])),
                false,
            ),
            (holding(&[Verb::Read], Some(vec![analyst.clone()])), false),
            (holding(&[Verb::Read], Some(vec![auditor.clone(), analyst.clone()])), false),
            // An equal policy read again (another configuration) is another access.
            (
                holding(&[Verb::Read], Some(vec![policy(&["*", "!execute_sql"]), auditor.clone()])),
                false,
            ),
            (holding(&[Verb::Read], None), false),
        ] {
            assert_eq!(kept.is_of(&principal), same, "{:?}", principal.tools);
        }
        let everything = holding(&[Verb::Read], None).tool_access();
        assert!(everything.is_of(&holding(&[Verb::Read], None)));
        assert!(!everything.is_of(&holding(&[Verb::Read], Some(vec![analyst]))));
    }
}

//! The `WWW-Authenticate: Bearer ...` or `DPoP ...` challenge of a 401 or 403 (RFC 6750
//! section 3, RFC 9449 section 7.1, RFC 9728 section 5.1): the protected-resource metadata URL,
//! the scope the server asks for, the error.

/// What a server's bearer challenge says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the protected-resource metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`, split on spaces.
    pub scope: Option<Vec<String>>,
    /// `error` (`invalid_token`, `insufficient_scope`, `use_dpop_nonce`, ...).
    pub error: Option<String>,
    /// Whether the server challenged with the `DPoP` scheme (it takes DPoP-bound tokens).
    pub dpop: bool,
}

impl Challenge {
    /// Read the `Bearer` and `DPoP` challenges of a header value; parameters of other schemes
    /// are ignored, and a header that is not understood gives an empty challenge.
    pub fn parse(header: &str) -> Challenge {
        let mut challenge = Challenge::default();
        let mut in_scheme = false;
        for parameter in parameters(header) {
            match parameter {
                Parameter::Scheme(scheme) => {
                    let dpop = scheme.eq_ignore_ascii_case("dpop");
                    challenge.dpop |= dpop;
                    in_scheme = dpop || scheme.eq_ignore_ascii_case("bearer");
                }
                Parameter::Pair(name, value_text) if in_scheme => {
                    match name.to_ascii_lowercase().as_str() {
                        "resource_metadata" => challenge.resource_metadata = Some(value_text),
                        "scope" => {
                            let scopes: Vec<String> =
                                value_text.split_whitespace().map(str::to_owned).collect();
                            if !scopes.is_empty() {
                                challenge.scope = Some(scopes);
                            }
                        }
                        "error" => challenge.error = Some(value_text),
                        _ => {}
                    }
                }
                Parameter::Pair(..) => {}
            }
        }
        challenge
    }

    /// Whether the server said the token lacks a scope (a 403 step-up).
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

enum Parameter {
    Scheme(String),
    Pair(String, String),
}

/// The schemes and `name=value` pairs of a header, in order; values may be quoted strings with
/// backslash escapes.
fn parameters(header: &str) -> Vec<Parameter> {
    let mut out = Vec::new();
    let bytes: Vec<char> = header.chars().collect();
    let mut index = 0;
    while index < bytes.len() {
        while index < bytes.len() && (bytes[index] == ',' || bytes[index].is_whitespace()) {
            index += 1;
        }
        let start = index;
        while index < bytes.len()
            && !bytes[index].is_whitespace()
            && bytes[index] != '='
            && bytes[index] != ','
        {
            index += 1;
        }
        if start == index {
            index += 1;
            continue;
        }
        let token: String = bytes[start..index].iter().collect();
        let mut look = index;
        while look < bytes.len() && bytes[look].is_whitespace() {
            look += 1;
        }
        if look < bytes.len() && bytes[look] == '=' {
            index = look + 1;
            while index < bytes.len() && bytes[index].is_whitespace() {
                index += 1;
            }
            let mut value = String::new();
            if index < bytes.len() && bytes[index] == '"' {
                index += 1;
                while index < bytes.len() && bytes[index] != '"' {
                    if bytes[index] == '\\' && index + 1 < bytes.len() {
                        index += 1;
                    }
                    value.push(bytes[index]);
                    index += 1;
                }
                index += 1;
            } else {
                while index < bytes.len() && bytes[index] != ',' && !bytes[index].is_whitespace() {
                    value.push(bytes[index]);
                    index += 1;
                }
            }
            out.push(Parameter::Pair(token, value));
        } else {
            out.push(Parameter::Scheme(token));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Challenge;

    fn check(header: &str, metadata: Option<&str>, scope: Option<&[&str]>, error: Option<&str>) {
        let challenge = Challenge::parse(header);
        assert_eq!(challenge.dpop, header.starts_with("DPoP"), "{header}");
        assert_eq!(challenge.resource_metadata.as_deref(), metadata, "{header}");
        assert_eq!(
            challenge.scope,
            scope.map(|scopes| scopes.iter().map(|s| (*s).to_owned()).collect()),
            "{header}"
        );
        assert_eq!(challenge.error.as_deref(), error, "{header}");
    }

    #[test]
    fn challenges_are_read_whatever_their_spacing_and_quoting() {
        check(
            r#"Bearer resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp""#,
            Some("https://a.example/.well-known/oauth-protected-resource/mcp"),
            None,
            None,
        );
        check(
            r#"Bearer scope="mcp:basic mcp:write", resource_metadata="http://localhost:1/x", error="insufficient_scope""#,
            Some("http://localhost:1/x"),
            Some(&["mcp:basic", "mcp:write"]),
            Some("insufficient_scope"),
        );
        check(
            r#"Bearer error=invalid_token,error_description="a \"quoted\" word, and a comma""#,
            None,
            None,
            Some("invalid_token"),
        );
        check(r#"Basic realm="x", Bearer scope="read""#, None, Some(&["read"]), None);
        check(r#"Basic realm="x" scope="not-bearer""#, None, None, None);
        check("", None, None, None);
        check(r#"Bearer scope="""#, None, None, None);
        check(
            r#"DPoP error="use_dpop_nonce", resource_metadata="http://localhost:1/m""#,
            Some("http://localhost:1/m"),
            None,
            Some("use_dpop_nonce"),
        );
        check(r#"DPoP algs="ES256", scope="a b""#, None, Some(&["a", "b"]), None);
    }
}

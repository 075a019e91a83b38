//! Targets for the tokens orca hands out and takes back: page tokens (`query_sql`'s paging) and
//! confirmation tokens (`execute_sql`'s writes). Text that orca did not issue is never accepted,
//! a token orca issued reads back as itself, and a changed byte makes a token refused or, when
//! the change is one the format ignores (letter case of the hex), still the same token: never a
//! different one.
//!
//! # Design notes
//!
//! `tokens.rs`: page tokens and confirmation tokens (`sql::check_token`, the database-free half of
//! redeeming): text orca did not issue is never accepted, an issued token reads back as itself for
//! its own binding only, and a changed byte never yields a different token.

use std::path::Path;
use std::sync::OnceLock;

use secrecy::SecretString;
use uuid::Uuid;

use super::Input;
use crate::sql::page::{PageToken, TokenError, fingerprint};
use crate::sql::{Binding, Secret, Statement, TokenCheck, check_token, classify, token_text};

/// "Now" for the targets, so that runs are repeatable.
const NOW: i64 = 1_800_000_000;

fn secret() -> Secret {
    secret_from("fuzz-orca-secret-of-at-least-32-characters")
}

fn secret_from(text: &str) -> Secret {
    Secret::load(Some(&SecretString::from(text.to_owned())), Path::new("/nonexistent"))
        .expect("a configured secret is used as it is")
}

/// The bytes of `text` with the byte at `position` XORed with `flip` (never zero), if that is
/// still text.
fn mutated(text: &str, position: u64, flip: u8) -> Option<String> {
    let mut bytes = text.as_bytes().to_vec();
    let index = usize::try_from(position % bytes.len() as u64).ok()?;
    bytes[index] ^= flip.max(1);
    String::from_utf8(bytes).ok()
}

/// Page tokens: the input read as a token is refused (it cannot carry orca's signature); a token
/// built from the input and issued by orca decodes to itself for its own query only, not after
/// its expiry and not under another secret; any one byte changed makes it refused or leaves
/// it the same token.
pub(super) fn page_token(data: &[u8]) {
    let secret = secret();
    let text = String::from_utf8_lossy(data);
    let forged = PageToken::decode(&text, &secret, &fingerprint(&["fuzz"]), NOW);
    assert!(forged.is_err(), "text orca never issued was accepted as a page token: {forged:?}");

    let mut input = Input::new(data);
    let query = input.text(64);
    let boundary = (0..input.byte() % 4)
        .map(|_| if input.byte().is_multiple_of(5) { None } else { Some(input.text(32)) })
        .collect();
    let window = match input.byte() % 3 {
        0 => None,
        1 => Some((Some(input.u64() as i64), None)),
        _ => Some((None, Some(input.u64() as i64))),
    };
    let token = PageToken {
        fingerprint: fingerprint(&[&query, "principal", "database"]),
        page: input.u64() % 1_000_000 + 2,
        boundary,
        equal_returned: input.u64() % 1_000_000,
        returned: input.u64(),
        window,
        expires: NOW + 600,
    };
    let issued = token.encode(&secret);
    assert_eq!(PageToken::decode(&issued, &secret, &token.fingerprint, NOW), Ok(token.clone()));
    assert_eq!(
        PageToken::decode(&issued, &secret, &fingerprint(&[&query, "principal", "other"]), NOW),
        Err(TokenError::Foreign)
    );
    assert_eq!(
        PageToken::decode(&issued, &secret, &token.fingerprint, NOW + 601),
        Err(TokenError::Expired)
    );
    let other = secret_from("another-orca-secret-of-32-characters-or-more");
    assert_eq!(
        PageToken::decode(&issued, &other, &token.fingerprint, NOW),
        Err(TokenError::Tampered)
    );
    if let Some(changed) = mutated(&issued, input.u64(), input.byte())
        && let Ok(decoded) = PageToken::decode(&changed, &secret, &token.fingerprint, NOW)
    {
        assert_eq!(decoded, token, "a changed page token was accepted as another: {changed}");
    }
}

/// A write statement to bind confirmation tokens to.
fn statement() -> &'static Statement {
    static STATEMENT: OnceLock<Statement> = OnceLock::new();
    STATEMENT.get_or_init(|| {
        let mut classification =
            classify("UPDATE invoice SET total = 0 WHERE invoice_id = 1").expect("it parses");
        classification.statements.remove(0)
    })
}

/// Confirmation tokens: the input read as a token never verifies; a token orca issues for a
/// statement, principal and database (from the input) reads back as its id and expiry and
/// verifies for that binding only; any one byte changed makes it malformed, unverified, or
/// the very same id and expiry.
pub(super) fn confirmation_token(data: &[u8]) {
    let secret = secret();
    let statement = statement();
    let mut input = Input::new(data);
    let principal = input.text(24);
    let database = input.text(24);
    let binding = Binding::new(statement, (&principal, &principal), &database);

    let text = String::from_utf8_lossy(data);
    if let Ok(check) = check_token(&secret, &text, &binding) {
        assert!(!check.signed_for_binding, "text orca never issued verified as a token: {text}");
    }

    let id = Uuid::from_u64_pair(input.u64(), input.u64());
    let expires = (input.u64() % 4_000_000_000) as i64;
    let issued = token_text(&secret, id, expires, &binding);
    let genuine = TokenCheck { id, expires, signed_for_binding: true };
    assert_eq!(check_token(&secret, &issued, &binding), Ok(genuine));

    let other_principal = format!("{principal}-other");
    let elsewhere = Binding::new(statement, (&other_principal, &principal), &database);
    assert_eq!(
        check_token(&secret, &issued, &elsewhere).map(|check| check.signed_for_binding),
        Ok(false),
        "a token verified for another principal"
    );
    let other = secret_from("another-orca-secret-of-32-characters-or-more");
    assert_eq!(
        check_token(&other, &issued, &binding).map(|check| check.signed_for_binding),
        Ok(false),
        "a token verified under another secret"
    );
    if let Some(changed) = mutated(&issued, input.u64(), input.byte())
        && let Ok(check) = check_token(&secret, &changed, &binding)
        && check.signed_for_binding
    {
        assert_eq!(check, genuine, "a changed token verified as another: {changed}");
    }
}

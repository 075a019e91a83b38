//! Detection of personally identifiable information (PII) in a column, from its name and a
//! sample of its values, so that the data-provider server can warn about or mask such columns
//! before their contents reach a client.
//!
//! The module holds one detector per kind of value that has a recognisable shape ([`is_email`],
//! [`is_phone`], [`is_credit_card`], [`is_iban`], [`is_ipv4`], [`is_ipv6`],
//! [`is_national_id_like`]), a reading of column names ([`name_signal`]), and
//! [`detect_column`], which combines both into one [`Detection`]. Everything is a pure function
//! over text: nothing here touches a database, and no regular-expression engine is used.
//!
//! # How `detect_column` scores a column
//!
//! Only the non-empty sampled values count (values are trimmed; empty ones stand for nulls).
//! For each kind with a value detector, the *share* is the fraction of those values that the
//! detector accepts; the best kind is the one with the largest share (ties go to the kind the
//! column name suggests, then to the order email, IBAN, credit card, IP address, national id,
//! phone).
//!
//! 1. **Values decide.** When the best share is at least 0.6, the kind is that of the values
//!    and the confidence is `0.5 + 0.45 × share`, plus 0.05 when the column name suggests the
//!    same kind, capped at 0.99. A name that suggests another kind is overruled.
//! 2. **Mixed values.** Otherwise, when the values that match *some* detector make up at least
//!    0.6 of the sample (a contact column holding both e-mail addresses and phone numbers), the
//!    kind is the one with the most matches and the confidence is
//!    `0.5 + 0.45 × mixed share − 0.1`, plus 0.05 when the name agrees, capped at 0.99.
//! 3. **The name decides.** Otherwise the column name alone gives the kind (see
//!    [`name_signal`]), with a strength that depends on how specific the name is:
//!
//!    | strength | names                                                                    |
//!    |----------|--------------------------------------------------------------------------|
//!    | 0.8      | `email`, `phone`, `credit_card`, `iban`, `ssn`, `tax_id`, `first_name`   |
//!    | 0.75     | `ip`, `card_number`, `cc_number`, `bank_account`, `address`, `street`    |
//!    | 0.7      | `postal_code`, `zip_code`, a person in a role (`customer_name`)          |
//!    | 0.65     | `city`, `zip`, `plz`, `ort` (quasi-identifiers), a bare `cc`             |
//!    | 0.45     | a plain `name`, as likely to name a genre or a product as a person       |
//!
//!    - For a kind that has a value detector, sampled values that fail to confirm the name
//!      lower the confidence: `strength − 0.2 × (1 − share / 0.6)`, where `share` is the
//!      share of that kind (below 0.6 here). Without sampled values the strength stands.
//!    - A plain `name` whose values mostly (a share of at least 0.6) look like personal names
//!      (two to four capitalised words) is a person's name with confidence
//!      `0.45 + 0.25 × share of such values`.
//! 4. Confidences are rounded to two decimals; below 0.5 the column is not reported.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

/// A kind of personally identifiable information.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PiiKind {
    /// An e-mail address.
    Email,
    /// A telephone number.
    Phone,
    /// A payment card number.
    CreditCard,
    /// An international bank account number.
    Iban,
    /// An IPv4 or IPv6 address.
    IpAddress,
    /// A national identifier: US social security number, UK national insurance number, German
    /// tax identification number, passport numbers.
    NationalId,
    /// A person's name.
    PersonName,
    /// A postal address or a part of one (street, city, postal code).
    Address,
}

impl PiiKind {
    /// The name of the kind as it appears in JSON (`email`, `credit_card`, ...).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            PiiKind::Email => "email",
            PiiKind::Phone => "phone",
            PiiKind::CreditCard => "credit_card",
            PiiKind::Iban => "iban",
            PiiKind::IpAddress => "ip_address",
            PiiKind::NationalId => "national_id",
            PiiKind::PersonName => "person_name",
            PiiKind::Address => "address",
        }
    }
}

impl fmt::Display for PiiKind {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// Which national conventions the locale-dependent detectors (phone numbers and national ids)
/// follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Locale {
    /// Any of the supported locales.
    #[default]
    Auto,
    /// The United States and the United Kingdom.
    En,
    /// Germany.
    De,
}

/// The outcome of [`detect_column`]: the kind of PII found and how sure the detection is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Detection {
    /// The kind of PII the column holds.
    pub kind: PiiKind,
    /// How sure the detection is, from 0.5 to 0.99, rounded to two decimals.
    pub confidence: f64,
}

/// The smallest confidence [`detect_column`] reports.
const REPORT_THRESHOLD: f64 = 0.5;

/// The share of sampled values a detector must accept for the values to decide the kind.
const VALUE_SHARE_THRESHOLD: f64 = 0.6;

/// The kinds that have a value detector, in the order that breaks ties between equal shares.
const DETECTABLE_KINDS: [PiiKind; 6] = [
    PiiKind::Email,
    PiiKind::Iban,
    PiiKind::CreditCard,
    PiiKind::IpAddress,
    PiiKind::NationalId,
    PiiKind::Phone,
];

/// Detects PII in a column from its name and a sample of its values (text forms; empty strings
/// count as nulls). The scoring is described in the module documentation. Returns `None` when
/// the confidence would be below 0.5.
#[must_use]
pub fn detect_column(column_name: &str, values: &[&str], locale: Locale) -> Option<Detection> {
    let samples: Vec<&str> =
        values.iter().map(|value| value.trim()).filter(|value| !value.is_empty()).collect();
    let name = name_evidence(column_name);
    let name_kind = name.map(|evidence| evidence.kind);

    let mut counts = [0_usize; DETECTABLE_KINDS.len()];
    let mut matching_any = 0_usize;
    for sample in &samples {
        let mut matched = false;
        for (index, kind) in DETECTABLE_KINDS.iter().enumerate() {
            if value_matches(*kind, sample, locale) {
                counts[index] += 1;
                matched = true;
            }
        }
        if matched {
            matching_any += 1;
        }
    }
    let sample_count = samples.len();
    let share_of = |count: usize| {
        if sample_count == 0 { 0.0 } else { count as f64 / sample_count as f64 }
    };

    // The kind with the most matching values; ties go to the name's kind, then to the order
    // of DETECTABLE_KINDS.
    let mut best: Option<(PiiKind, usize)> = None;
    for (index, kind) in DETECTABLE_KINDS.iter().enumerate() {
        let count = counts[index];
        if count == 0 {
            continue;
        }
        let better = match best {
            None => true,
            Some((best_kind, best_count)) => {
                count > best_count
                    || (count == best_count
                        && name_kind == Some(*kind)
                        && name_kind != Some(best_kind))
            }
        };
        if better {
            best = Some((*kind, count));
        }
    }

    if let Some((kind, count)) = best {
        let agreement = if name_kind == Some(kind) { 0.05 } else { 0.0 };
        let share = share_of(count);
        if share >= VALUE_SHARE_THRESHOLD {
            return reported(kind, 0.5 + 0.45 * share + agreement);
        }
        let mixed_share = share_of(matching_any);
        if mixed_share >= VALUE_SHARE_THRESHOLD {
            return reported(kind, 0.5 + 0.45 * mixed_share - 0.1 + agreement);
        }
    }

    let evidence = name?;
    let confidence = if let Some(index) =
        DETECTABLE_KINDS.iter().position(|kind| *kind == evidence.kind)
    {
        if sample_count == 0 {
            evidence.strength
        } else {
            let share = share_of(counts[index]);
            evidence.strength - 0.2 * (1.0 - share / VALUE_SHARE_THRESHOLD)
        }
    } else if evidence.weak {
        let person_like = samples.iter().filter(|sample| looks_like_person_name(sample)).count();
        let share = share_of(person_like);
        if share >= VALUE_SHARE_THRESHOLD { 0.45 + 0.25 * share } else { evidence.strength }
    } else {
        evidence.strength
    };
    reported(evidence.kind, confidence)
}

/// A detection with its confidence capped and rounded, or `None` below the report threshold.
fn reported(kind: PiiKind, confidence: f64) -> Option<Detection> {
    let confidence = (confidence.min(0.99) * 100.0).round() / 100.0;
    (confidence >= REPORT_THRESHOLD).then_some(Detection { kind, confidence })
}

/// Whether the value detector of `kind` accepts `value`; kinds without a detector accept
/// nothing.
fn value_matches(kind: PiiKind, value: &str, locale: Locale) -> bool {
    match kind {
        PiiKind::Email => is_email(value),
        PiiKind::Phone => is_phone(value, locale),
        PiiKind::CreditCard => is_credit_card(value),
        PiiKind::Iban => is_iban(value),
        PiiKind::IpAddress => is_ipv4(value) || is_ipv6(value),
        PiiKind::NationalId => is_national_id_like(value, locale),
        PiiKind::PersonName | PiiKind::Address => false,
    }
}

/// Whether a value is shaped like a personal name: two to four words of letters (with inner
/// hyphens, apostrophes or a trailing dot for initials), each starting with a capital letter.
fn looks_like_person_name(value: &str) -> bool {
    let words: Vec<&str> = value.split(' ').collect();
    if !(2..=4).contains(&words.len()) || value.chars().count() > 60 {
        return false;
    }
    words.iter().all(|word| {
        let mut chars = word.chars();
        let Some(first) = chars.next() else {
            return false;
        };
        first.is_uppercase()
            && word.chars().all(|c| c.is_alphabetic() || c == '-' || c == '\'' || c == '.')
            && !word.ends_with('-')
            && word.chars().filter(|c| *c == '.').count() <= 1
            && (!word.contains('.') || word.ends_with('.'))
    })
}

// ---------------------------------------------------------------------------------------------
// Column names
// ---------------------------------------------------------------------------------------------

/// What a column name says about PII, and how strongly.
#[derive(Debug, Clone, Copy, PartialEq)]
struct NameEvidence {
    kind: PiiKind,
    strength: f64,
    /// Whether the name is too vague to count on its own (a plain `name`).
    weak: bool,
}

impl NameEvidence {
    fn new(kind: PiiKind, strength: f64) -> Option<NameEvidence> {
        Some(NameEvidence { kind, strength, weak: false })
    }
}

/// The kind of PII a column name suggests, when the name is specific enough to count on its
/// own: `email`, `contact_email` and `e_mail` suggest an e-mail address; `phone`, `tel`,
/// `mobile`, `fax`, `telefon` and `handy` a phone number; `card_number`, `cc_number` and
/// `credit_card` a card number; `iban` and `bank_account` an IBAN; `ip` and `client_ip` an IP
/// address; `ssn`, `social_security_number`, `nino`, `tax_id`, `steuer_id`, `national_id` and
/// `passport` a national id; `first_name`, `surname`, `vorname`, `customer_name` and the like a
/// person's name; `address`, `street`, `city`, `zip`, `postal_code`, `strasse`, `plz` and `ort`
/// an address.
///
/// Names are split into words at underscores, other punctuation and camel-case boundaries
/// (`contactEmail`). A name that refers to something else about the value is no signal:
/// `email_verified`, `phone_count`, `address_id`, `is_email`. A plain `name` is no signal
/// either: it names genres and products as often as people ([`detect_column`] still weighs
/// it together with the values).
#[must_use]
pub fn name_signal(column_name: &str) -> Option<PiiKind> {
    name_evidence(column_name).filter(|evidence| !evidence.weak).map(|evidence| evidence.kind)
}

/// Last words that make a name about a property of the value rather than the value itself.
const NOT_THE_VALUE_ITSELF: &[&str] = &[
    "count",
    "cnt",
    "verified",
    "confirmed",
    "enabled",
    "disabled",
    "status",
    "type",
    "kind",
    "flag",
    "valid",
    "validated",
    "hash",
    "hashed",
    "sha",
    "md5",
    "at",
    "date",
    "time",
    "ts",
    "length",
    "len",
    "format",
    "pattern",
    "regex",
    "provider",
    "domain",
    "opt",
    "optin",
    "consent",
    "preference",
    "preferences",
    "visible",
    "masked",
    "encrypted",
    "template",
    "sent",
    "bounced",
    "source",
    "prefix",
    "extension",
    "label",
    "expiry",
    "expires",
    "expiration",
    "issuer",
    "brand",
    "country",
    "checked",
    "updated",
    "created",
];

/// Last words that make a name a reference to another row rather than the value itself.
const REFERENCES: &[&str] = &["id", "ids", "uuid", "guid", "key", "fk", "pk", "ref"];

/// First words that make a name a yes-or-no question about the value.
const QUESTIONS: &[&str] = &["is", "has", "can", "should", "allow", "allows", "needs"];

/// Words for a telephone number.
const PHONE_WORDS: &[&str] = &[
    "phone",
    "phones",
    "telephone",
    "tel",
    "mobile",
    "mobil",
    "fax",
    "cell",
    "cellphone",
    "telefon",
    "telefonnummer",
    "handy",
    "handynummer",
    "phonenumber",
    "msisdn",
];

/// Words for a specific part of a postal address.
const STREET_WORDS: &[&str] = &[
    "address",
    "addresses",
    "addr",
    "street",
    "streetaddress",
    "strasse",
    "straße",
    "hausnummer",
    "housenumber",
    "anschrift",
    "adresse",
];

/// Words for a coarse part of a postal address (quasi-identifiers).
const LOCALITY_WORDS: &[&str] = &[
    "city",
    "zip",
    "zipcode",
    "postal",
    "postcode",
    "postalcode",
    "plz",
    "ort",
    "town",
    "wohnort",
];

/// Single words for a person's name.
const PERSON_NAME_WORDS: &[&str] = &[
    "firstname",
    "lastname",
    "fullname",
    "surname",
    "givenname",
    "familyname",
    "forename",
    "middlename",
    "maidenname",
    "vorname",
    "nachname",
    "familienname",
];

/// Words that, followed by `name`, make it the name of a person (`first_name`).
const PERSON_NAME_PARTS: &[&str] =
    &["first", "last", "full", "given", "family", "middle", "maiden", "sur", "fore", "legal"];

/// People in a role, whose `<role>_name` is a person's name (`customer_name`).
const PERSON_ROLES: &[&str] = &[
    "customer",
    "contact",
    "person",
    "employee",
    "author",
    "patient",
    "client",
    "owner",
    "recipient",
    "sender",
    "holder",
    "cardholder",
    "accountholder",
    "manager",
    "buyer",
    "seller",
    "member",
    "student",
    "teacher",
    "driver",
    "passenger",
    "guest",
    "applicant",
    "beneficiary",
    "billing",
    "shipping",
    "kunde",
    "kunden",
    "mitarbeiter",
];

/// Reads a column name; see [`name_signal`].
fn name_evidence(column_name: &str) -> Option<NameEvidence> {
    let words = column_words(column_name);
    let last = words.last()?.as_str();
    let first = words.first()?.as_str();
    if QUESTIONS.contains(&first) || NOT_THE_VALUE_ITSELF.contains(&last) {
        return None;
    }
    let has = |word: &str| words.iter().any(|candidate| candidate == word);
    let has_pair =
        |left: &str, right: &str| words.windows(2).any(|pair| pair[0] == left && pair[1] == right);

    // National ids first: several of them end in `id`, which otherwise marks a reference.
    let national_words = [
        "ssn",
        "nino",
        "passport",
        "personalausweis",
        "steuerid",
        "steueridentifikationsnummer",
        "taxid",
        "nationalid",
        "socialsecurity",
        "socialsecuritynumber",
    ];
    if national_words.iter().any(|word| has(word))
        || has_pair("social", "security")
        || has_pair("national", "insurance")
        || has_pair("national", "id")
        || has_pair("tax", "id")
        || has_pair("steuer", "id")
        || has_pair("passport", "number")
    {
        return NameEvidence::new(PiiKind::NationalId, 0.8);
    }
    if REFERENCES.contains(&last) {
        return None;
    }

    if words.iter().any(|word| {
        matches!(word.as_str(), "email" | "emails" | "mail" | "emailaddress" | "mailaddress")
            || word.ends_with("email")
    }) {
        return NameEvidence::new(PiiKind::Email, 0.8);
    }
    if words
        .iter()
        .any(|word| matches!(word.as_str(), "ip" | "ipaddr" | "ipaddress" | "ipv4" | "ipv6"))
        || ["remote", "client", "peer", "source"].iter().any(|word| has_pair(word, "addr"))
    {
        return NameEvidence::new(PiiKind::IpAddress, 0.75);
    }
    if words.iter().any(|word| PHONE_WORDS.contains(&word.as_str()) || word.ends_with("phone")) {
        return NameEvidence::new(PiiKind::Phone, 0.8);
    }
    if has("creditcard") || has("cardnumber") || has("ccnumber") || has("credit") || has("pan") {
        return NameEvidence::new(PiiKind::CreditCard, 0.8);
    }
    if has("card") && (words.len() == 1 || ["number", "no", "num", "nr"].contains(&last)) {
        return NameEvidence::new(PiiKind::CreditCard, 0.75);
    }
    if has("cc") && ["number", "no", "num", "nr"].contains(&last) {
        return NameEvidence::new(PiiKind::CreditCard, 0.75);
    }
    if has("cc") {
        return NameEvidence::new(PiiKind::CreditCard, 0.65);
    }
    if has("iban") {
        return NameEvidence::new(PiiKind::Iban, 0.8);
    }
    if has("bankaccount") || has("kontonummer") || has_pair("bank", "account") {
        return NameEvidence::new(PiiKind::Iban, 0.75);
    }
    if words.iter().any(|word| STREET_WORDS.contains(&word.as_str())) {
        return NameEvidence::new(PiiKind::Address, 0.75);
    }
    if has_pair("house", "number") || has_pair("postal", "code") || has_pair("zip", "code") {
        return NameEvidence::new(PiiKind::Address, 0.7);
    }
    if words.iter().any(|word| LOCALITY_WORDS.contains(&word.as_str())) {
        return NameEvidence::new(PiiKind::Address, 0.65);
    }
    if words.iter().any(|word| PERSON_NAME_WORDS.contains(&word.as_str()))
        || PERSON_NAME_PARTS.iter().any(|part| has_pair(part, "name"))
    {
        return NameEvidence::new(PiiKind::PersonName, 0.8);
    }
    if PERSON_ROLES.iter().any(|role| has_pair(role, "name")) {
        return NameEvidence::new(PiiKind::PersonName, 0.7);
    }
    if words.len() == 1 && matches!(last, "name" | "fullname") {
        return Some(NameEvidence { kind: PiiKind::PersonName, strength: 0.45, weak: true });
    }
    None
}

/// Splits a column name into lowercase words at anything that is not a letter or digit and at
/// camel-case boundaries (`contactEmail` → `contact`, `email`; `IPAddress` → `ip`, `address`),
/// and joins `e` `mail` into `email`. Shared with the semantic hints.
pub(crate) fn column_words(column_name: &str) -> Vec<String> {
    let chars: Vec<char> = column_name.chars().collect();
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    for (index, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        if c.is_uppercase() && !current.is_empty() && index > 0 {
            let previous = chars[index - 1];
            let next_is_lowercase = chars.get(index + 1).is_some_and(|next| next.is_lowercase());
            if previous.is_lowercase()
                || previous.is_ascii_digit()
                || (previous.is_uppercase() && next_is_lowercase)
            {
                words.push(std::mem::take(&mut current));
            }
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    let mut joined: Vec<String> = Vec::with_capacity(words.len());
    for word in words {
        if word == "mail" && joined.last().is_some_and(|previous| previous == "e") {
            joined.pop();
            joined.push("email".to_owned());
        } else {
            joined.push(word);
        }
    }
    joined
}

// ---------------------------------------------------------------------------------------------
// E-mail addresses
// ---------------------------------------------------------------------------------------------

/// Whether a value is an e-mail address: one `@`, a local part of letters, digits and the
/// RFC 5322 atom characters without leading, trailing or doubled dots, and a domain of at least
/// two labels whose last is alphabetic (or an `xn--` label). Surrounding whitespace is ignored;
/// quoted local parts and address literals are not accepted.
#[must_use]
pub fn is_email(value: &str) -> bool {
    let value = value.trim();
    if value.len() > 254 {
        return false;
    }
    let Some((local, domain)) = value.split_once('@') else {
        return false;
    };
    is_email_local_part(local) && is_domain_name(domain)
}

/// The part of an e-mail address before the `@`.
fn is_email_local_part(local: &str) -> bool {
    !local.is_empty()
        && local.len() <= 64
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local.chars().all(|c| c.is_alphanumeric() || "!#$%&'*+/=?^_`{|}~.-".contains(c))
}

/// A DNS name of at least two labels with an alphabetic top-level label; letters outside ASCII
/// are allowed (internationalised domain names).
pub(crate) fn is_domain_name(domain: &str) -> bool {
    if domain.is_empty() || domain.len() > 253 {
        return false;
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if labels.len() < 2 {
        return false;
    }
    let labels_are_valid = labels.iter().all(|label| {
        (1..=63).contains(&label.len())
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_alphanumeric() || c == '-')
    });
    let top = labels[labels.len() - 1];
    let top_is_valid = (top.chars().count() >= 2 && top.chars().all(char::is_alphabetic))
        || (top.len() > 4 && top.starts_with("xn--"));
    labels_are_valid && top_is_valid
}

// ---------------------------------------------------------------------------------------------
// Phone numbers
// ---------------------------------------------------------------------------------------------

/// A run of digits in a phone number, possibly in parentheses.
#[derive(Debug)]
struct DigitGroup {
    digits: String,
    in_parentheses: bool,
}

/// The shape of a phone-like text: an optional leading `+` and groups of digits separated by
/// single spaces, dashes, dots or slashes.
#[derive(Debug)]
struct PhoneShape {
    plus: bool,
    groups: Vec<DigitGroup>,
    separators: Vec<char>,
}

impl PhoneShape {
    fn digits(&self) -> String {
        self.groups.iter().map(|group| group.digits.as_str()).collect()
    }
}

/// Reads the shape of a phone-like text, or `None` when it holds anything else (letters,
/// doubled separators, more than one parenthesised group, a dangling separator).
fn phone_shape(value: &str) -> Option<PhoneShape> {
    let chars: Vec<char> = value.trim().chars().collect();
    let mut index = 0;
    let plus = chars.first() == Some(&'+');
    if plus {
        index += 1;
    }
    let mut groups: Vec<DigitGroup> = Vec::new();
    let mut separators = Vec::new();
    loop {
        // A group: digits, or digits in parentheses.
        let in_parentheses = chars.get(index) == Some(&'(');
        if in_parentheses {
            if plus && groups.is_empty() {
                return None;
            }
            index += 1;
        }
        let start = index;
        while chars.get(index).is_some_and(char::is_ascii_digit) {
            index += 1;
        }
        if index == start {
            return None;
        }
        let digits: String = chars[start..index].iter().collect();
        if in_parentheses {
            if chars.get(index) != Some(&')') || digits.len() > 5 {
                return None;
            }
            index += 1;
        }
        groups.push(DigitGroup { digits, in_parentheses });
        let Some(&next) = chars.get(index) else {
            break;
        };
        if matches!(next, ' ' | '-' | '.' | '/') {
            separators.push(next);
            index += 1;
            if !chars.get(index).is_some_and(|c| c.is_ascii_digit() || *c == '(') {
                return None;
            }
        } else if next == '(' || in_parentheses {
            // `+49(0)171` and `(415)555-2671` need no separator around the parentheses.
        } else {
            return None;
        }
    }
    if groups.iter().filter(|group| group.in_parentheses).count() > 1 {
        return None;
    }
    Some(PhoneShape { plus, groups, separators })
}

/// Whether a value is a telephone number. International numbers (a leading `+` or `00`) are
/// accepted in every locale: `+1` numbers need ten national digits, `+44` nine or ten, `+49` six
/// to twelve, other country codes eight to fifteen digits in all; a `(0)` trunk prefix after
/// the country code is allowed. National numbers follow the locale:
///
/// - `En`: US numbers in groups of 3, 3 and 4 with separators or parentheses (`(415) 555-2671`,
///   `415-555-2671`, `1-415-555-2671`), whose area code and exchange do not start with 0 or 1;
///   UK numbers of ten or eleven digits starting with a single 0 (`020 7946 0958`).
/// - `De`: seven to thirteen digits starting with a single 0 (`030 901820`, `030/901820`,
///   `0171 1234567`, `(030) 901820`).
/// - `Auto`: either.
///
/// Plain digit runs without a `+` or a leading 0 (`4155552671`), numbers with fewer than 7 or
/// more than 15 digits, dates (`2026-11-22`, `22.11.2026`) and decimals (`12.50`) are refused.
#[must_use]
pub fn is_phone(value: &str, locale: Locale) -> bool {
    let Some(shape) = phone_shape(value) else {
        return false;
    };
    let digits = shape.digits();
    if !(7..=15).contains(&digits.len()) || looks_like_date(&shape) || looks_like_decimal(&shape) {
        return false;
    }
    if shape.plus || digits.starts_with("00") {
        return is_international_phone(&shape);
    }
    match locale {
        Locale::En => is_en_national_phone(&shape, &digits),
        Locale::De => is_de_national_phone(&digits),
        Locale::Auto => is_en_national_phone(&shape, &digits) || is_de_national_phone(&digits),
    }
}

/// An international number, written after `+` or `00`.
fn is_international_phone(shape: &PhoneShape) -> bool {
    // The groups after the international prefix, without a trunk 0 in parentheses (`(0)`,
    // `(030)`).
    let mut groups: Vec<&str> = Vec::with_capacity(shape.groups.len());
    for (index, group) in shape.groups.iter().enumerate() {
        let mut text = group.digits.as_str();
        if index == 0 && !shape.plus {
            let Some(rest) = text.strip_prefix("00") else {
                return false;
            };
            text = rest;
        }
        if group.in_parentheses {
            text = text.strip_prefix('0').unwrap_or(text);
        }
        groups.push(text);
    }
    if groups.first().is_some_and(|first| first.is_empty()) {
        groups.remove(0);
    }
    let digits = groups.concat();
    if digits.is_empty() || digits.starts_with('0') {
        return false;
    }
    // The country code is the first group when it is written apart, else a known prefix.
    let (country_code, national) = if groups.len() > 1 && (1..=3).contains(&groups[0].len()) {
        (groups[0], groups[1..].concat())
    } else {
        let length = if digits.starts_with('1') {
            1
        } else if digits.starts_with("44") || digits.starts_with("49") {
            2
        } else {
            return (8..=15).contains(&digits.len());
        };
        (&digits[..length], digits[length..].to_owned())
    };
    if national.is_empty() || national.starts_with('0') {
        return false;
    }
    let bytes = national.as_bytes();
    match country_code {
        "1" => national.len() == 10 && bytes[0] >= b'2' && bytes[3] >= b'2',
        "44" => (9..=10).contains(&national.len()),
        "49" => (6..=12).contains(&national.len()),
        _ => (8..=15).contains(&(country_code.len() + national.len())),
    }
}

/// A US number in groups of 3, 3 and 4 (optionally after a `1`), or a UK number with a trunk 0.
fn is_en_national_phone(shape: &PhoneShape, digits: &str) -> bool {
    let lengths: Vec<usize> = shape.groups.iter().map(|group| group.digits.len()).collect();
    let us_groups = match lengths.as_slice() {
        [3, 3, 4] => Some(digits),
        [1, 3, 3, 4] if shape.groups[0].digits == "1" => digits.get(1..),
        _ => None,
    };
    if let Some(national) = us_groups {
        let bytes = national.as_bytes();
        let parentheses_on_area_code =
            shape.groups.iter().all(|group| !group.in_parentheses || group.digits.len() == 3);
        if bytes[0] >= b'2' && bytes[3] >= b'2' && parentheses_on_area_code {
            return true;
        }
    }
    is_trunk_national(digits, 10..=11)
}

/// A German national number with a trunk 0.
fn is_de_national_phone(digits: &str) -> bool {
    is_trunk_national(digits, 7..=13)
}

/// Digits starting with exactly one 0, of a length within `lengths`.
fn is_trunk_national(digits: &str, lengths: std::ops::RangeInclusive<usize>) -> bool {
    let bytes = digits.as_bytes();
    lengths.contains(&digits.len()) && bytes[0] == b'0' && bytes[1] != b'0'
}

/// Three groups joined by the same dash, dot or slash that read as a calendar date.
fn looks_like_date(shape: &PhoneShape) -> bool {
    let [first, second, third] = shape.groups.as_slice() else {
        return false;
    };
    let same_separator = shape.separators.len() == 2
        && shape.separators[0] == shape.separators[1]
        && matches!(shape.separators[0], '-' | '.' | '/');
    if !same_separator || shape.plus {
        return false;
    }
    let number = |group: &DigitGroup| group.digits.parse::<u32>().unwrap_or(u32::MAX);
    let (a, b, c) = (number(first), number(second), number(third));
    let lengths = (first.digits.len(), second.digits.len(), third.digits.len());
    match lengths {
        (4, 1..=2, 1..=2) => (1..=12).contains(&b) && (1..=31).contains(&c),
        (1..=2, 1..=2, 2 | 4) => {
            (1..=31).contains(&a) && (1..=31).contains(&b) && (a <= 12 || b <= 12)
        }
        _ => false,
    }
}

/// A decimal number: one dot and nothing else separating, with one or two digits after it.
fn looks_like_decimal(shape: &PhoneShape) -> bool {
    shape.separators == ['.'] && shape.groups.last().is_some_and(|group| group.digits.len() <= 2)
}

// ---------------------------------------------------------------------------------------------
// Payment cards
// ---------------------------------------------------------------------------------------------

/// Whether a value is a payment card number: 13 to 19 digits, optionally in groups of three to
/// six digits (the last group may be shorter) separated by single spaces or single dashes (not
/// both), starting with a known issuer prefix (4, 51–55, 22–27, 34, 37 or 6) and passing the
/// Luhn checksum.
#[must_use]
pub fn is_credit_card(value: &str) -> bool {
    let value = value.trim();
    let mut digits: Vec<u8> = Vec::with_capacity(19);
    let mut separator: Option<u8> = None;
    let mut groups: Vec<usize> = vec![0];
    for byte in value.bytes() {
        if byte.is_ascii_digit() {
            digits.push(byte - b'0');
            if let Some(current) = groups.last_mut() {
                *current += 1;
            }
        } else if byte == b' ' || byte == b'-' {
            if separator.is_some_and(|seen| seen != byte) || groups.last() == Some(&0) {
                return false;
            }
            separator = Some(byte);
            groups.push(0);
        } else {
            return false;
        }
    }
    let Some((last_group, earlier_groups)) = groups.split_last() else {
        return false;
    };
    let grouped_well = *last_group >= 1
        && (earlier_groups.is_empty() || *last_group <= 6)
        && earlier_groups.iter().all(|length| (3..=6).contains(length));
    grouped_well
        && (13..=19).contains(&digits.len())
        && has_card_prefix(&digits)
        && luhn_checksum_holds(&digits)
}

/// Whether the digits start with a prefix that card issuers use.
fn has_card_prefix(digits: &[u8]) -> bool {
    matches!(digits, [4 | 6, ..] | [5, 1..=5, ..] | [2, 2..=7, ..] | [3, 4 | 7, ..])
}

/// The Luhn checksum: doubling every second digit from the right, the digit sum is a multiple
/// of ten.
fn luhn_checksum_holds(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(position, &digit)| {
            let digit = u32::from(digit);
            if position % 2 == 1 {
                let doubled = digit * 2;
                if doubled > 9 { doubled - 9 } else { doubled }
            } else {
                digit
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

// ---------------------------------------------------------------------------------------------
// IBANs
// ---------------------------------------------------------------------------------------------

/// IBAN lengths of countries that are checked exactly; other countries may use 15 to 34.
const IBAN_LENGTHS: &[(&str, usize)] = &[
    ("AT", 20),
    ("BE", 16),
    ("BG", 22),
    ("CH", 21),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DK", 18),
    ("EE", 20),
    ("ES", 24),
    ("FI", 18),
    ("FR", 27),
    ("GB", 22),
    ("GR", 27),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IS", 26),
    ("IT", 27),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("MC", 27),
    ("MT", 31),
    ("NL", 18),
    ("NO", 15),
    ("PL", 28),
    ("PT", 25),
    ("RO", 24),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
];

/// Whether a value is an IBAN: a two-letter country code, two check digits and an
/// alphanumeric account part, written without spaces or in groups of four separated by single
/// spaces; the length must match the country (DE 22, GB 22, FR 27, NL 18, ES 24, IT 27, CH 21,
/// AT 20, BE 16 and other European countries; 15 to 34 elsewhere) and the number must leave a
/// remainder of 1 when divided by 97 (ISO 13616). Letters may be lowercase.
#[must_use]
pub fn is_iban(value: &str) -> bool {
    let value = value.trim();
    let groups: Vec<&str> = value.split(' ').collect();
    if let Some((last, earlier)) = groups.split_last()
        && (last.is_empty()
            || (last.len() > 4 && !earlier.is_empty())
            || earlier.iter().any(|group| group.len() != 4))
    {
        return false;
    }
    let compact: Vec<u8> = groups.concat().to_ascii_uppercase().into_bytes();
    if !(15..=34).contains(&compact.len()) || !compact.iter().all(u8::is_ascii_alphanumeric) {
        return false;
    }
    let (country, check) = (&compact[0..2], &compact[2..4]);
    if !country.iter().all(u8::is_ascii_uppercase) || !check.iter().all(u8::is_ascii_digit) {
        return false;
    }
    if matches!(check, b"00" | b"01" | b"99") {
        return false;
    }
    let expected_length =
        IBAN_LENGTHS.iter().find(|(code, _)| code.as_bytes() == country).map(|(_, length)| *length);
    if expected_length.is_some_and(|length| length != compact.len()) {
        return false;
    }
    let rearranged = compact[4..].iter().chain(&compact[0..4]);
    let remainder = rearranged.fold(0_u32, |remainder, &byte| {
        if byte.is_ascii_digit() {
            (remainder * 10 + u32::from(byte - b'0')) % 97
        } else {
            (remainder * 100 + u32::from(byte - b'A') + 10) % 97
        }
    });
    remainder == 1
}

// ---------------------------------------------------------------------------------------------
// IP addresses
// ---------------------------------------------------------------------------------------------

/// Whether a value is an IPv4 address in dotted-quad form: four decimal parts from 0 to 255
/// without leading zeros (`0` itself is fine), as [`Ipv4Addr`] reads it.
#[must_use]
pub fn is_ipv4(value: &str) -> bool {
    let parts: Vec<&str> = value.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|part| {
            (1..=3).contains(&part.len())
                && part.bytes().all(|byte| byte.is_ascii_digit())
                && (part.len() == 1 || !part.starts_with('0'))
                && part.parse::<u16>().is_ok_and(|number| number <= 255)
        })
        && value.parse::<Ipv4Addr>().is_ok()
}

/// Whether a value is an IPv6 address (full, compressed with `::`, or with an embedded IPv4
/// address), as [`Ipv6Addr`] reads it; zone ids and brackets are not accepted.
#[must_use]
pub fn is_ipv6(value: &str) -> bool {
    value.contains(':') && value.parse::<Ipv6Addr>().is_ok()
}

// ---------------------------------------------------------------------------------------------
// National ids
// ---------------------------------------------------------------------------------------------

/// Whether a value looks like a national identifier of the locale:
///
/// - `En`: a US social security number `123-45-6789` (or with spaces) whose area is not 000,
///   666 or 900–999, group not 00 and serial not 0000; or a UK national insurance number
///   `AB123456C` / `AB 12 34 56 C` in capitals, whose prefix letters avoid D, F, I, Q, U and V
///   (and O second), whose prefix is not BG, GB, KN, NK, NT, TN or ZZ, and whose suffix is A to
///   D.
/// - `De`: a German tax identification number (Steuer-ID): eleven digits, optionally with
///   single spaces, not starting with 0; among the first ten digits exactly one digit occurs
///   twice or three times (three times not in a row), every other digit at most once, so at
///   least one digit is missing; the eleventh digit is the ISO 7064 MOD 11,10 check digit.
/// - `Auto`: either.
#[must_use]
pub fn is_national_id_like(value: &str, locale: Locale) -> bool {
    let value = value.trim();
    match locale {
        Locale::En => is_us_social_security_number(value) || is_uk_national_insurance_number(value),
        Locale::De => is_german_tax_id(value),
        Locale::Auto => {
            is_us_social_security_number(value)
                || is_uk_national_insurance_number(value)
                || is_german_tax_id(value)
        }
    }
}

/// A US social security number with dashes or spaces.
fn is_us_social_security_number(value: &str) -> bool {
    let parts: Vec<&str> = value.split(['-', ' ']).collect();
    let separators_agree = value.matches('-').count() == 2 || value.matches(' ').count() == 2;
    let [area, group, serial] = parts.as_slice() else {
        return false;
    };
    let digits_only = |text: &str| text.bytes().all(|byte| byte.is_ascii_digit());
    if !separators_agree
        || area.len() != 3
        || group.len() != 2
        || serial.len() != 4
        || !parts.iter().all(|part| digits_only(part))
    {
        return false;
    }
    let area_number: u32 = area.parse().unwrap_or(0);
    (1..=899).contains(&area_number) && area_number != 666 && *group != "00" && *serial != "0000"
}

/// A UK national insurance number, compact or as `AB 12 34 56 C`.
fn is_uk_national_insurance_number(value: &str) -> bool {
    let compact: Vec<u8> = if value.contains(' ') {
        let parts: Vec<&str> = value.split(' ').collect();
        let lengths: Vec<usize> = parts.iter().map(|part| part.len()).collect();
        if lengths != [2, 2, 2, 2, 1] {
            return false;
        }
        parts.concat().into_bytes()
    } else {
        value.as_bytes().to_vec()
    };
    let [first, second, digits @ .., suffix] = compact.as_slice() else {
        return false;
    };
    if digits.len() != 6 || !digits.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let first_ok = first.is_ascii_uppercase() && !b"DFIQUV".contains(first);
    let second_ok = second.is_ascii_uppercase() && !b"DFIOQUV".contains(second);
    let prefix = [*first, *second];
    let prefix_ok = ![b"BG", b"GB", b"KN", b"NK", b"NT", b"TN", b"ZZ"].contains(&&prefix);
    first_ok && second_ok && prefix_ok && b"ABCD".contains(suffix)
}

/// A German tax identification number (Steuer-ID).
fn is_german_tax_id(value: &str) -> bool {
    if value.starts_with(' ') || value.ends_with(' ') || value.contains("  ") {
        return false;
    }
    let digits: Vec<u8> = value.bytes().filter(|byte| *byte != b' ').collect();
    if digits.len() != 11 || !digits.iter().all(u8::is_ascii_digit) || digits[0] == b'0' {
        return false;
    }
    let digits: Vec<u8> = digits.iter().map(|byte| byte - b'0').collect();
    let mut occurrences = [0_u8; 10];
    for digit in &digits[..10] {
        occurrences[usize::from(*digit)] += 1;
    }
    let repeated: Vec<usize> = (0..10).filter(|digit| occurrences[*digit] > 1).collect();
    let [repeated_digit] = repeated.as_slice() else {
        return false;
    };
    let repeats = occurrences[*repeated_digit];
    if repeats > 3 {
        return false;
    }
    if repeats == 3
        && digits[..10]
            .windows(3)
            .any(|window| window.iter().all(|d| usize::from(*d) == *repeated_digit))
    {
        return false;
    }
    german_tax_id_check_digit(&digits[..10]) == digits[10]
}

/// The ISO 7064 MOD 11,10 check digit of the first ten digits of a Steuer-ID.
fn german_tax_id_check_digit(digits: &[u8]) -> u8 {
    let mut product: u32 = 10;
    for digit in digits {
        let mut sum = (u32::from(*digit) + product) % 10;
        if sum == 0 {
            sum = 10;
        }
        product = (sum * 2) % 11;
    }
    let check = 11 - product;
    if check == 10 { 0 } else { check as u8 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::Config;

    /// Checks a detector against values it must accept and values it must refuse.
    fn check_detector(name: &str, detector: impl Fn(&str) -> bool, cases: &[(&str, bool)]) {
        for (value, expected) in cases {
            assert_eq!(detector(value), *expected, "{name}({value:?})");
        }
    }

    #[test]
    fn e_mail_addresses_are_recognised_and_near_misses_are_not() {
        check_detector(
            "is_email",
            is_email,
            &[
                ("ada@example.com", true),
                ("ada.lovelace+orca@mail.example.co.uk", true),
                ("  x_y-z@sub.domain.io  ", true),
                ("o'brien@example.ie", true),
                ("jürgen@müller.de", true),
                ("user@xn--mller-kva.de", true),
                ("a@b", false),
                ("@example.com", false),
                ("user@", false),
                ("user@@example.com", false),
                ("user@exa mple.com", false),
                (".user@example.com", false),
                ("us..er@example.com", false),
                ("user@-example.com", false),
                ("user@example.c", false),
                ("user@example.123", false),
                ("plainaddress", false),
                ("user@example..com", false),
            ],
        );
    }

    #[test]
    fn phone_numbers_follow_the_locale() {
        let cases: &[(&str, Locale, bool)] = &[
            // United States and United Kingdom.
            ("+1 415 555 2671", Locale::En, true),
            ("(415) 555-2671", Locale::En, true),
            ("415-555-2671", Locale::En, true),
            ("415.555.2671", Locale::En, true),
            ("1-415-555-2671", Locale::En, true),
            ("+1 (415) 555-2671", Locale::En, true),
            ("+14155552671", Locale::En, true),
            ("+44 20 7946 0958", Locale::En, true),
            ("+44 (0)20 7946 0958", Locale::En, true),
            ("020 7946 0958", Locale::En, true),
            ("07700 900123", Locale::En, true),
            ("(415) 155-2671", Locale::En, false),
            ("(115) 555-2671", Locale::En, false),
            ("4155552671", Locale::En, false),
            ("030 901820", Locale::En, false),
            ("+1 415 555 267", Locale::En, false),
            // Germany.
            ("+49 30 901820", Locale::De, true),
            ("030 901820", Locale::De, true),
            ("0171 1234567", Locale::De, true),
            ("+49 (0)171 1234567", Locale::De, true),
            ("+49(0)171 1234567", Locale::De, true),
            ("030/901820", Locale::De, true),
            ("(030) 901820", Locale::De, true),
            ("0049 30 901820", Locale::De, true),
            ("+4930901820", Locale::De, true),
            ("(415) 555-2671", Locale::De, false),
            ("+49 0 30 901820", Locale::De, false),
            // Either.
            ("(415) 555-2671", Locale::Auto, true),
            ("030/901820", Locale::Auto, true),
            ("+33 1 23 45 67 89", Locale::Auto, true),
            // Things that are not phone numbers in any locale.
            ("+49", Locale::Auto, false),
            ("2026", Locale::Auto, false),
            ("12.50", Locale::Auto, false),
            ("0123456.78", Locale::Auto, false),
            ("2026-11-22", Locale::Auto, false),
            ("01.11.2026", Locale::Auto, false),
            ("01/11/2026", Locale::Auto, false),
            ("12345", Locale::Auto, false),
            ("+1 234 567 890 123 456 78", Locale::Auto, false),
            ("030  901820", Locale::Auto, false),
            ("030-", Locale::Auto, false),
            ("call 030 901820", Locale::Auto, false),
            ("(030) (901) 820", Locale::Auto, false),
            ("", Locale::Auto, false),
        ];
        for (value, locale, expected) in cases {
            assert_eq!(is_phone(value, *locale), *expected, "is_phone({value:?}, {locale:?})");
        }
    }

    #[test]
    fn card_numbers_need_a_known_prefix_and_a_valid_luhn_checksum() {
        check_detector(
            "is_credit_card",
            is_credit_card,
            &[
                ("4111111111111111", true),
                ("4111 1111 1111 1111", true),
                ("4111-1111-1111-1111", true),
                ("5500 0000 0000 0004", true),
                ("2223 0031 2200 3222", true),
                ("3782 822463 10005", true),
                ("6011 1111 1111 1117", true),
                ("4222222222222", true),
                ("4111111111111112", false),
                ("1234 5678 9012 3456", false),
                ("7111 1111 1111 1114", false),
                ("4111 1111-1111 1111", false),
                ("4111  1111 1111 1111", false),
                ("4111 1111 1111 1111 ", true),
                (" 4111 1111 1111 1111-", false),
                ("411111111111", false),
                ("41111111111111111111", false),
                ("4111 1111 1111 111x", false),
                ("41 11 11 11 11 11 11 11", false),
            ],
        );
    }

    #[test]
    fn ibans_need_the_country_length_and_a_valid_check() {
        check_detector(
            "is_iban",
            is_iban,
            &[
                ("DE89370400440532013000", true),
                ("DE89 3704 0044 0532 0130 00", true),
                ("de89 3704 0044 0532 0130 00", true),
                ("GB82WEST12345698765432", true),
                ("FR1420041010050500013M02606", true),
                ("NL91ABNA0417164300", true),
                ("ES9121000418450200051332", true),
                ("IT60X0542811101000000123456", true),
                ("CH9300762011623852957", true),
                ("AT611904300234573201", true),
                ("BE68539007547034", true),
                ("DE88370400440532013000", false),
                ("DE8937040044053201300", false),
                ("DE89 3704 0044 0532 013000", false),
                ("DE89  3704 0044 0532 0130 00", false),
                ("GB82 WEST 1234 5698 7654 3", false),
                ("NL91ABNA041716430", false),
                ("1289370400440532013000", false),
                ("DEXX370400440532013000", false),
                ("DE89-3704-0044-0532-0130-00", false),
                ("", false),
            ],
        );
    }

    #[test]
    fn ipv4_addresses_are_dotted_quads_without_leading_zeros() {
        check_detector(
            "is_ipv4",
            is_ipv4,
            &[
                ("192.168.0.1", true),
                ("10.0.0.255", true),
                ("0.0.0.0", true),
                ("255.255.255.255", true),
                ("8.8.8.8", true),
                ("100.64.1.2", true),
                ("999.1.1.1", false),
                ("1.2.3", false),
                ("1.2.3.4.5", false),
                ("01.2.3.4", false),
                ("1.2.3.256", false),
                ("1..2.3", false),
                ("a.b.c.d", false),
                (" 1.2.3.4", false),
                ("+1.2.3.4", false),
                ("", false),
            ],
        );
    }

    #[test]
    fn ipv6_addresses_may_be_compressed_or_embed_ipv4() {
        check_detector(
            "is_ipv6",
            is_ipv6,
            &[
                ("2001:0db8:0000:0000:0000:ff00:0042:8329", true),
                ("2001:db8::ff00:42:8329", true),
                ("::1", true),
                ("fe80::", true),
                ("::ffff:192.0.2.128", true),
                ("64:ff9b::192.0.2.33", true),
                ("2001:db8::1::1", false),
                ("12:30:00", false),
                ("2001:db8:g::1", false),
                ("fe80::1%eth0", false),
                ("[::1]", false),
                ("192.168.0.1", false),
                ("1:2:3:4:5:6:7:8:9", false),
            ],
        );
    }

    #[test]
    fn national_ids_follow_the_locale() {
        let cases: &[(&str, Locale, bool)] = &[
            // US social security numbers.
            ("123-45-6789", Locale::En, true),
            ("078 05 1121", Locale::En, true),
            ("899-12-3456", Locale::En, true),
            ("000-12-3456", Locale::En, false),
            ("666-12-3456", Locale::En, false),
            ("900-12-3456", Locale::En, false),
            ("123-00-6789", Locale::En, false),
            ("123-45-0000", Locale::En, false),
            ("123456789", Locale::En, false),
            ("123-45 6789", Locale::En, false),
            ("2026-11-22", Locale::En, false),
            // UK national insurance numbers.
            ("AB123456C", Locale::En, true),
            ("AB 12 34 56 C", Locale::En, true),
            ("JG103759A", Locale::En, true),
            ("DA123456C", Locale::En, false),
            ("AO123456C", Locale::En, false),
            ("GB123456C", Locale::En, false),
            ("AB123456E", Locale::En, false),
            ("ab123456c", Locale::En, false),
            ("AB 123456 C", Locale::En, false),
            // German tax identification numbers.
            ("86095742719", Locale::De, true),
            ("47036892816", Locale::De, true),
            ("65929970489", Locale::De, true),
            ("86 095 742 719", Locale::De, true),
            ("86095742718", Locale::De, false),
            ("06095742719", Locale::De, false),
            ("12345678901", Locale::De, false),
            ("11145678901", Locale::De, false),
            ("8609574271", Locale::De, false),
            ("123-45-6789", Locale::De, false),
            // Either.
            ("123-45-6789", Locale::Auto, true),
            ("86095742719", Locale::Auto, true),
            ("86095742719", Locale::En, false),
        ];
        for (value, locale, expected) in cases {
            assert_eq!(
                is_national_id_like(value, *locale),
                *expected,
                "is_national_id_like({value:?}, {locale:?})"
            );
        }
    }

    #[test]
    fn column_names_are_split_into_words() {
        let cases: &[(&str, &[&str])] = &[
            ("email", &["email"]),
            ("e_mail", &["email"]),
            ("E-Mail", &["email"]),
            ("contactEmail", &["contact", "email"]),
            ("IPAddress", &["ip", "address"]),
            ("customer_ID", &["customer", "id"]),
            ("address_line1", &["address", "line1"]),
            ("Straße", &["straße"]),
            ("  ", &[]),
        ];
        for (name, expected) in cases {
            assert_eq!(column_words(name), *expected, "column_words({name:?})");
        }
    }

    #[test]
    fn column_names_signal_pii_only_when_they_name_the_value_itself() {
        let cases: &[(&str, Option<PiiKind>)] = &[
            ("email", Some(PiiKind::Email)),
            ("e_mail", Some(PiiKind::Email)),
            ("contact_email", Some(PiiKind::Email)),
            ("EmailAddress", Some(PiiKind::Email)),
            ("mail", Some(PiiKind::Email)),
            ("phone", Some(PiiKind::Phone)),
            ("tel", Some(PiiKind::Phone)),
            ("mobile_number", Some(PiiKind::Phone)),
            ("fax", Some(PiiKind::Phone)),
            ("telefon", Some(PiiKind::Phone)),
            ("handy", Some(PiiKind::Phone)),
            ("card_number", Some(PiiKind::CreditCard)),
            ("cc_number", Some(PiiKind::CreditCard)),
            ("credit_card", Some(PiiKind::CreditCard)),
            ("iban", Some(PiiKind::Iban)),
            ("bank_account", Some(PiiKind::Iban)),
            ("ip", Some(PiiKind::IpAddress)),
            ("client_ip", Some(PiiKind::IpAddress)),
            ("ip_address", Some(PiiKind::IpAddress)),
            ("remote_addr", Some(PiiKind::IpAddress)),
            ("ssn", Some(PiiKind::NationalId)),
            ("social_security_number", Some(PiiKind::NationalId)),
            ("nino", Some(PiiKind::NationalId)),
            ("tax_id", Some(PiiKind::NationalId)),
            ("steuer_id", Some(PiiKind::NationalId)),
            ("national_id", Some(PiiKind::NationalId)),
            ("passport", Some(PiiKind::NationalId)),
            ("first_name", Some(PiiKind::PersonName)),
            ("lastName", Some(PiiKind::PersonName)),
            ("full_name", Some(PiiKind::PersonName)),
            ("surname", Some(PiiKind::PersonName)),
            ("given_name", Some(PiiKind::PersonName)),
            ("vorname", Some(PiiKind::PersonName)),
            ("nachname", Some(PiiKind::PersonName)),
            ("customer_name", Some(PiiKind::PersonName)),
            ("address", Some(PiiKind::Address)),
            ("billing_address", Some(PiiKind::Address)),
            ("street", Some(PiiKind::Address)),
            ("city", Some(PiiKind::Address)),
            ("zip", Some(PiiKind::Address)),
            ("postal_code", Some(PiiKind::Address)),
            ("postcode", Some(PiiKind::Address)),
            ("strasse", Some(PiiKind::Address)),
            ("plz", Some(PiiKind::Address)),
            ("ort", Some(PiiKind::Address)),
            // Not a signal: plain names, references, properties of the value.
            ("name", None),
            ("product_name", None),
            ("genre", None),
            ("email_verified", None),
            ("is_email", None),
            ("phone_count", None),
            ("address_id", None),
            ("email_id", None),
            ("created_at", None),
            ("sort_order", None),
            ("description", None),
            ("id", None),
            ("", None),
        ];
        for (name, expected) in cases {
            assert_eq!(name_signal(name), *expected, "name_signal({name:?})");
        }
    }

    /// Checks a column detection: the expected kind and confidence, or `None`.
    fn check_column(name: &str, values: &[&str], locale: Locale, expected: Option<(PiiKind, f64)>) {
        let got = detect_column(name, values, locale);
        let got = got.map(|detection| (detection.kind, detection.confidence));
        assert_eq!(got, expected, "detect_column({name:?}, {values:?}, {locale:?})");
    }

    #[test]
    fn columns_are_detected_from_values_and_names() {
        let emails = ["ada@example.com", "bob@example.org", "carol@example.net", "dan@example.de"];
        let phones = ["+49 30 901820", "030 901820", "0171 1234567", "+49 (0)171 1234567"];
        type Case<'a> = (&'a str, &'a [&'a str], Locale, Option<(PiiKind, f64)>);
        let cases: &[Case<'_>] = &[
            // Values decide; a name that agrees adds 0.05.
            ("contact", &emails, Locale::Auto, Some((PiiKind::Email, 0.95))),
            ("email", &emails, Locale::Auto, Some((PiiKind::Email, 0.99))),
            ("telefon", &phones, Locale::De, Some((PiiKind::Phone, 0.99))),
            ("c", &phones, Locale::Auto, Some((PiiKind::Phone, 0.95))),
            ("c", &phones, Locale::En, Some((PiiKind::Phone, 0.84))),
            // Nulls (empty strings) do not count.
            (
                "c",
                &["ada@example.com", "", " ", "bob@example.org"],
                Locale::Auto,
                Some((PiiKind::Email, 0.95)),
            ),
            // Three of four values: share 0.75.
            (
                "c",
                &["ada@example.com", "n/a", "bob@example.org", "carol@example.net"],
                Locale::Auto,
                Some((PiiKind::Email, 0.84)),
            ),
            // A value match contradicting the name wins.
            ("phone", &emails, Locale::Auto, Some((PiiKind::Email, 0.95))),
            (
                "address",
                &["10.0.0.1", "192.168.1.20", "::1"],
                Locale::Auto,
                Some((PiiKind::IpAddress, 0.95)),
            ),
            // Mixed PII: half e-mail addresses, half phone numbers.
            (
                "contact",
                &["ada@example.com", "030 901820", "bob@example.org", "0171 1234567"],
                Locale::Auto,
                Some((PiiKind::Email, 0.85)),
            ),
            (
                "phone_or_mail",
                &["ada@example.com", "030 901820", "bob@example.org", "0171 1234567"],
                Locale::Auto,
                Some((PiiKind::Email, 0.9)),
            ),
            // Other detectors.
            (
                "payment",
                &["4111 1111 1111 1111", "5500 0000 0000 0004"],
                Locale::Auto,
                Some((PiiKind::CreditCard, 0.95)),
            ),
            (
                "konto",
                &["DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432"],
                Locale::Auto,
                Some((PiiKind::Iban, 0.95)),
            ),
            ("ssn", &["123-45-6789", "078-05-1121"], Locale::En, Some((PiiKind::NationalId, 0.99))),
            // The name alone: person and address kinds have no value detector.
            ("first_name", &["Ada", "Grace"], Locale::Auto, Some((PiiKind::PersonName, 0.8))),
            ("customer_name", &[], Locale::Auto, Some((PiiKind::PersonName, 0.7))),
            ("street", &["Unter den Linden 1"], Locale::De, Some((PiiKind::Address, 0.75))),
            ("zip", &["10115", "80331"], Locale::De, Some((PiiKind::Address, 0.65))),
            // A detectable kind named but not confirmed by the values is weaker.
            ("email", &[], Locale::Auto, Some((PiiKind::Email, 0.8))),
            ("email", &["n/a", "unknown"], Locale::Auto, Some((PiiKind::Email, 0.6))),
            (
                "email",
                &["n/a", "ada@example.com", "unknown", "x"],
                Locale::Auto,
                Some((PiiKind::Email, 0.68)),
            ),
            ("client_ip", &["n/a"], Locale::Auto, Some((PiiKind::IpAddress, 0.55))),
            ("cc", &["n/a"], Locale::Auto, None),
            // A plain `name` counts only when the values look like people's names.
            (
                "name",
                &["Ada Lovelace", "Grace Hopper", "Alan M. Turing", "Jean-Luc Picard"],
                Locale::Auto,
                Some((PiiKind::PersonName, 0.7)),
            ),
            (
                "name",
                &["Rock", "Jazz", "Heavy Metal", "Alternative & Punk", "Bossa Nova"],
                Locale::Auto,
                None,
            ),
            ("name", &[], Locale::Auto, None),
            // Nothing personal.
            ("title", &["For Those About To Rock", "Balls to the Wall"], Locale::Auto, None),
            ("price", &["12.50", "9.99", "2026"], Locale::Auto, None),
            ("created", &["2026-11-22", "2026-11-21"], Locale::Auto, None),
            ("c", &["ada@example.com", "x", "y", "z"], Locale::Auto, None),
            ("c", &[], Locale::Auto, None),
        ];
        for (name, values, locale, expected) in cases {
            check_column(name, values, *locale, *expected);
        }
    }

    #[test]
    fn kinds_and_locales_serialise_as_their_documented_names() {
        let kinds = [
            (PiiKind::Email, "email"),
            (PiiKind::Phone, "phone"),
            (PiiKind::CreditCard, "credit_card"),
            (PiiKind::Iban, "iban"),
            (PiiKind::IpAddress, "ip_address"),
            (PiiKind::NationalId, "national_id"),
            (PiiKind::PersonName, "person_name"),
            (PiiKind::Address, "address"),
        ];
        for (kind, name) in kinds {
            assert_eq!(serde_json::to_value(kind).ok(), Some(serde_json::json!(name)));
            assert_eq!(kind.as_str(), name);
            assert_eq!(kind.to_string(), name);
        }
        for (locale, name) in [(Locale::Auto, "auto"), (Locale::En, "en"), (Locale::De, "de")] {
            assert_eq!(serde_json::to_value(locale).ok(), Some(serde_json::json!(name)));
            let parsed: Option<Locale> = serde_json::from_value(serde_json::json!(name)).ok();
            assert_eq!(parsed, Some(locale));
        }
        let detection = Detection { kind: PiiKind::CreditCard, confidence: 0.95 };
        assert_eq!(
            serde_json::to_value(detection).ok(),
            Some(serde_json::json!({"kind": "credit_card", "confidence": 0.95}))
        );
    }

    /// The Luhn checksum written independently of the code under test.
    fn reference_luhn(digits: &str) -> bool {
        let mut sum = 0;
        for (position, c) in digits.chars().rev().enumerate() {
            let mut digit = c.to_digit(10).unwrap_or(0);
            if position % 2 == 1 {
                digit *= 2;
                if digit > 9 {
                    digit -= 9;
                }
            }
            sum += digit;
        }
        sum % 10 == 0
    }

    fn config(cases: u32) -> Config {
        Config { cases, failure_persistence: None, ..Config::default() }
    }

    proptest! {
        #![proptest_config(config(512))]

        #[test]
        fn digit_strings_failing_luhn_are_never_card_numbers(
            digits in prop::collection::vec(0_u8..10, 1..24),
            grouped in any::<bool>(),
        ) {
            let plain: String = digits.iter().map(|digit| char::from(b'0' + digit)).collect();
            prop_assume!(!reference_luhn(&plain));
            prop_assert!(!is_credit_card(&plain), "{plain}");
            if grouped {
                let chunks: Vec<String> = plain
                    .as_bytes()
                    .chunks(4)
                    .map(|chunk| String::from_utf8_lossy(chunk).into_owned())
                    .collect();
                let spaced = chunks.join(" ");
                prop_assert!(!is_credit_card(&spaced), "{spaced}");
            }
        }

        #[test]
        fn ipv4_agrees_with_the_standard_library_on_dotted_quads(
            parts in prop::array::uniform4(0_u16..256),
        ) {
            let text = format!("{}.{}.{}.{}", parts[0], parts[1], parts[2], parts[3]);
            prop_assert_eq!(is_ipv4(&text), text.parse::<Ipv4Addr>().is_ok(), "{}", text);
            prop_assert!(is_ipv4(&text), "{}", text);
        }

        #[test]
        fn ipv4_agrees_with_the_standard_library_on_digits_and_dots(
            text in "[0-9.]{0,18}",
        ) {
            prop_assert_eq!(is_ipv4(&text), text.parse::<Ipv4Addr>().is_ok(), "{}", text);
        }

        #[test]
        fn detectors_never_panic_on_arbitrary_text(
            chars in prop::collection::vec(any::<char>(), 0..40),
            name in "[a-zA-Z_]{0,20}",
        ) {
            let text: String = chars.into_iter().collect();
            for locale in [Locale::Auto, Locale::En, Locale::De] {
                let _ = is_phone(&text, locale);
                let _ = is_national_id_like(&text, locale);
                let _ = detect_column(&name, &[text.as_str()], locale);
            }
            let _ = (is_email(&text), is_credit_card(&text), is_iban(&text));
            let _ = (is_ipv4(&text), is_ipv6(&text), name_signal(&text));
        }

        #[test]
        fn phone_like_text_never_panics(text in "[+0-9 ()./-]{0,24}") {
            for locale in [Locale::Auto, Locale::En, Locale::De] {
                let _ = is_phone(&text, locale);
            }
        }
    }
}

//! Skills (the `io.modelcontextprotocol/skills` extension, SEP-2640): list a server's skills,
//! and load one only when it is needed, its `SKILL.md` read with `resources/read` and checked
//! against the listing (byte size, then `sha256:` digest, then the YAML frontmatter field by
//! field) before any of it is returned; a supporting file is read only from a loaded skill, and
//! verified the same way. Nothing is fetched ahead of need: listing reads no file.
//!
//! # Design notes
//!
//! `skills.rs`: the skills extension (SEP-2640) on `McpClient`: `list_skills` (only when the server
//! declares `io.modelcontextprotocol/skills`, reading no file), `load_skill` (`SKILL.md` by
//! `resources/read`, checked against the listing: size, `sha256:` digest, frontmatter field by
//! field; `SkillError` on any difference), `read_skill_file` (only from a `LoadedSkill`, which only
//! `load_skill` makes).

use base64::Engine;
use rmcp::model::{PaginatedRequestParams, ResourceContents, SkillResources};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::McpError;
use super::connection::{LIST_TIMEOUT, MAX_PAGES, McpClient};

/// A skill as the server lists it, before any of its files is read.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillInfo {
    /// The URI of its `SKILL.md`.
    pub uri: String,
    /// The name its listing gives.
    pub name: String,
    /// The description its listing gives.
    pub description: String,
    /// Every field of the listing's frontmatter (`name` and `description` among them).
    pub frontmatter: Map<String, Value>,
    /// Its files with their sizes and digests; `None` when the server lists it as dynamic
    /// (no stable digests exist, so only the frontmatter can be checked).
    pub files: Option<Vec<SkillFile>>,
}

/// One file of a skill as the listing promises it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    /// Its resource URI.
    pub uri: String,
    /// `sha256:` and 64 lowercase hex digits.
    pub digest: String,
    /// Its length in bytes.
    pub size: u64,
}

/// A skill whose `SKILL.md` was read and matched its listing; only [`McpClient::load_skill`]
/// makes one, so a supporting file is never read from a skill that was not loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedSkill {
    info: SkillInfo,
    instructions: String,
}

impl LoadedSkill {
    /// The listing it was verified against.
    pub fn info(&self) -> &SkillInfo {
        &self.info
    }

    /// The verified text of its `SKILL.md`, frontmatter included.
    pub fn instructions(&self) -> &str {
        &self.instructions
    }
}

/// Why a skill or one of its files was not given.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// The server does not declare the skills extension, so it is never asked.
    #[error(
        "the server does not offer skills (it does not declare the io.modelcontextprotocol/skills extension)"
    )]
    NotOffered,
    /// The file is not among those the skill lists, so there is nothing to verify it against.
    #[error("refused {uri}: the skill's listing does not include it, so it cannot be verified")]
    NotListed {
        /// The file asked for.
        uri: String,
    },
    /// The file's byte length is not the listed size.
    #[error("refused {uri}: it is {actual} bytes, the skill's listing says {expected}")]
    Size {
        /// The file.
        uri: String,
        /// The listed size.
        expected: u64,
        /// What was read.
        actual: u64,
    },
    /// The file's digest is not the listed one.
    #[error("refused {uri}: its digest is {actual}, the skill's listing says {expected}")]
    Digest {
        /// The file.
        uri: String,
        /// The listed digest.
        expected: String,
        /// The digest of what was read.
        actual: String,
    },
    /// The frontmatter of `SKILL.md` differs from the listing's in these fields.
    #[error("refused {uri}: its frontmatter differs from the skill's listing in {}", fields.join(", "))]
    Frontmatter {
        /// The `SKILL.md`.
        uri: String,
        /// The fields whose values differ, or that only one side has.
        fields: Vec<String>,
    },
    /// The file could not be read as the skill needs it (no content, not UTF-8, no
    /// frontmatter block, frontmatter that is not a YAML mapping).
    #[error("refused {uri}: {reason}")]
    Unreadable {
        /// The file.
        uri: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Listing or reading failed.
    #[error(transparent)]
    Mcp(#[from] McpError),
}

impl McpClient {
    /// The server's skills (`skills/list`, every page), without reading any of their files.
    ///
    /// # Errors
    ///
    /// [`SkillError::NotOffered`] when the server does not declare the extension (nothing is
    /// sent then); listing errors.
    pub async fn list_skills(&self) -> Result<Vec<SkillInfo>, SkillError> {
        if !self.server_capabilities().is_some_and(|capabilities| capabilities.supports_skills()) {
            return Err(SkillError::NotOffered);
        }
        let mut skills = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = PaginatedRequestParams::default().with_cursor(cursor.clone());
            let page = tokio::time::timeout(LIST_TIMEOUT, self.peer().list_skills(Some(params)))
                .await
                .map_err(|_| McpError::Timeout {
                    tool: "skills/list".to_owned(),
                    seconds: LIST_TIMEOUT.as_secs(),
                })?
                .map_err(|error| McpError::Transport(format!("skills/list: {error}")))?;
            skills.extend(page.skills.into_iter().map(skill_info));
            match page.next_cursor {
                Some(next) if Some(&next) != cursor.as_ref() => cursor = Some(next),
                _ => break,
            }
        }
        Ok(skills)
    }

    /// Load a listed skill: read its `SKILL.md` and check it against the listing (size, then
    /// digest, then the frontmatter field by field). On any difference the skill is refused and
    /// nothing of what was read is returned.
    ///
    /// # Errors
    ///
    /// [`SkillError::Size`], [`SkillError::Digest`], [`SkillError::Frontmatter`],
    /// [`SkillError::NotListed`] (the listing's files leave out its `SKILL.md`),
    /// [`SkillError::Unreadable`]; reading errors.
    pub async fn load_skill(&self, skill: &SkillInfo) -> Result<LoadedSkill, SkillError> {
        let bytes = bytes_of(&skill.uri, self.read_resource(&skill.uri).await?)?;
        let instructions = verify_instructions(skill, &bytes)?;
        Ok(LoadedSkill { info: skill.clone(), instructions })
    }

    /// One supporting file of a loaded skill, by its URI or its path under the skill's root
    /// (`references/FORMS.md`), read and checked against the listing like `SKILL.md`.
    ///
    /// # Errors
    ///
    /// [`SkillError::NotListed`] when the skill does not list the file (or, for a dynamic
    /// skill, when it is outside the skill's root), [`SkillError::Size`],
    /// [`SkillError::Digest`], [`SkillError::Unreadable`]; reading errors.
    pub async fn read_skill_file(
        &self,
        skill: &LoadedSkill,
        file: &str,
    ) -> Result<Vec<u8>, SkillError> {
        let uri = file_uri(&skill.info, file)?;
        let bytes = bytes_of(&uri, self.read_resource(&uri).await?)?;
        verify_file(&skill.info, &uri, &bytes)?;
        Ok(bytes)
    }
}

fn skill_info(skill: rmcp::model::Skill) -> SkillInfo {
    let frontmatter = match serde_json::to_value(&skill.frontmatter) {
        Ok(Value::Object(fields)) => fields,
        _ => Map::new(),
    };
    let files = match skill.resources {
        SkillResources::Files(files) => Some(
            files
                .into_iter()
                .map(|file| SkillFile { uri: file.uri, digest: file.digest, size: file.size })
                .collect(),
        ),
        _ => None,
    };
    SkillInfo {
        uri: skill.uri,
        name: skill.frontmatter.name,
        description: skill.frontmatter.description,
        frontmatter,
        files,
    }
}

/// The directory a skill's files live under: its `SKILL.md` URI without the file name.
fn root_of(skill: &SkillInfo) -> &str {
    skill.uri.rsplit_once('/').map_or("", |(root, _)| root)
}

/// The URI of a supporting file named by URI or by path under the skill's root, when the
/// skill can vouch for it.
fn file_uri(skill: &SkillInfo, file: &str) -> Result<String, SkillError> {
    let root = root_of(skill);
    let uri = if file.contains("://") {
        file.to_owned()
    } else {
        format!("{root}/{}", file.trim_start_matches('/'))
    };
    let known = match &skill.files {
        Some(files) => files.iter().any(|listed| listed.uri == uri),
        None => uri.starts_with(&format!("{root}/")) && !uri.split('/').any(|part| part == ".."),
    };
    if known { Ok(uri) } else { Err(SkillError::NotListed { uri }) }
}

/// The bytes a `resources/read` gave for `uri`: its text, or its decoded blob.
fn bytes_of(uri: &str, contents: Vec<ResourceContents>) -> Result<Vec<u8>, SkillError> {
    let unreadable =
        |reason: &str| SkillError::Unreadable { uri: uri.to_owned(), reason: reason.to_owned() };
    let mut bytes = None;
    for content in contents {
        let (content_uri, found) = match content {
            ResourceContents::TextResourceContents { uri, text, .. } => (uri, text.into_bytes()),
            ResourceContents::BlobResourceContents { uri, blob, .. } => {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(blob.as_bytes())
                    .map_err(|_| unreadable("its blob is not valid base64"))?;
                (uri, decoded)
            }
            _ => continue,
        };
        if content_uri == uri {
            return Ok(found);
        }
        bytes.get_or_insert(found);
    }
    bytes.ok_or_else(|| unreadable("the server returned no content for it"))
}

/// The listed size and digest of `uri`, checked against `bytes`: the size first, so a wrong
/// length is refused without hashing. A dynamic skill lists none, so there is nothing to check.
fn verify_file(skill: &SkillInfo, uri: &str, bytes: &[u8]) -> Result<(), SkillError> {
    let Some(files) = &skill.files else { return Ok(()) };
    let listed = files
        .iter()
        .find(|file| file.uri == uri)
        .ok_or_else(|| SkillError::NotListed { uri: uri.to_owned() })?;
    let actual = bytes.len() as u64;
    if actual != listed.size {
        return Err(SkillError::Size { uri: uri.to_owned(), expected: listed.size, actual });
    }
    let actual = format!("sha256:{}", hex::encode(Sha256::digest(bytes)));
    if actual != listed.digest.to_ascii_lowercase() {
        return Err(SkillError::Digest {
            uri: uri.to_owned(),
            expected: listed.digest.clone(),
            actual,
        });
    }
    Ok(())
}

/// The text of a skill's `SKILL.md` when its size, digest and frontmatter match the listing.
fn verify_instructions(skill: &SkillInfo, bytes: &[u8]) -> Result<String, SkillError> {
    verify_file(skill, &skill.uri, bytes)?;
    let unreadable = |reason: String| SkillError::Unreadable { uri: skill.uri.clone(), reason };
    let text = std::str::from_utf8(bytes)
        .map_err(|_| unreadable("it is not UTF-8 text".to_owned()))?
        .to_owned();
    let found = frontmatter_of(&text).map_err(unreadable)?;
    let fields = differing_fields(&found, &skill.frontmatter);
    if !fields.is_empty() {
        return Err(SkillError::Frontmatter { uri: skill.uri.clone(), fields });
    }
    Ok(text)
}

/// The YAML frontmatter at the start of a `SKILL.md`, between two `---` lines.
fn frontmatter_of(text: &str) -> Result<Map<String, Value>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err("it does not begin with a `---` frontmatter block".to_owned());
    }
    let mut yaml = String::new();
    for line in lines {
        if line.trim_end() == "---" {
            return match serde_saphyr::from_str::<Value>(&yaml) {
                Ok(Value::Object(fields)) => Ok(fields),
                Ok(_) => Err("its frontmatter is not a YAML mapping".to_owned()),
                Err(error) => Err(format!("its frontmatter is not valid YAML: {error}")),
            };
        }
        yaml.push_str(line);
    }
    Err("its frontmatter block is not closed by a `---` line".to_owned())
}

/// The fields whose values differ between two frontmatters, a field missing on one side
/// counting as null, in the listing's order and then the file's.
fn differing_fields(found: &Map<String, Value>, listed: &Map<String, Value>) -> Vec<String> {
    let mut fields: Vec<String> = Vec::new();
    for name in listed.keys().chain(found.keys()) {
        let differs =
            found.get(name).unwrap_or(&Value::Null) != listed.get(name).unwrap_or(&Value::Null);
        if differs && !fields.contains(name) {
            fields.push(name.clone());
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SKILL_MD: &str = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nSkill body.\n";
    const FORMS: &str = "Supporting content.\n";
    const ROOT: &str = "skill://pdf-processing";

    fn digest(text: &str) -> String {
        format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
    }

    fn listed(uri: &str, text: &str) -> SkillFile {
        SkillFile { uri: uri.to_owned(), digest: digest(text), size: text.len() as u64 }
    }

    /// The listing of the conformance suite's skill, for the files as `skill_md` and `forms`.
    fn skill(skill_md: &str, forms: &str) -> SkillInfo {
        let frontmatter = json!({
            "name": "pdf-processing",
            "description": "Extract, fill, and assemble PDF documents"
        });
        SkillInfo {
            uri: format!("{ROOT}/SKILL.md"),
            name: "pdf-processing".to_owned(),
            description: "Extract, fill, and assemble PDF documents".to_owned(),
            frontmatter: frontmatter.as_object().unwrap().clone(),
            files: Some(vec![
                listed(&format!("{ROOT}/SKILL.md"), skill_md),
                listed(&format!("{ROOT}/references/FORMS.md"), forms),
            ]),
        }
    }

    #[test]
    fn a_skill_md_is_loaded_only_when_its_size_digest_and_frontmatter_match_the_listing() {
        let tampered_body = SKILL_MD.replace("Skill body.", "Evil body!!");
        let longer = format!("{SKILL_MD}extra bytes the entry did not account for\n");
        let other_description = SKILL_MD.replace(
            "description: Extract, fill, and assemble PDF documents",
            "description: Exfiltrate credentials",
        );
        let extra_field = SKILL_MD.replace("---\n\n", "allowed-tools: Bash\n---\n\n");
        let mut with_field = skill(&extra_field, FORMS);
        with_field.frontmatter.insert("allowed-tools".to_owned(), json!("Bash"));
        let mut dynamic = skill(SKILL_MD, FORMS);
        dynamic.files = None;
        // (listing, what the server sends, the refusal's message, or None when loaded)
        let cases: Vec<(SkillInfo, String, Option<String>)> = vec![
            (skill(SKILL_MD, FORMS), SKILL_MD.to_owned(), None),
            (with_field, extra_field.clone(), None),
            (dynamic.clone(), SKILL_MD.to_owned(), None),
            (
                skill(SKILL_MD, FORMS),
                tampered_body.clone(),
                Some(format!(
                    "refused {ROOT}/SKILL.md: its digest is {}, the skill's listing says {}",
                    digest(&tampered_body),
                    digest(SKILL_MD)
                )),
            ),
            (
                skill(SKILL_MD, FORMS),
                longer.clone(),
                Some(format!(
                    "refused {ROOT}/SKILL.md: it is {} bytes, the skill's listing says {}",
                    longer.len(),
                    SKILL_MD.len()
                )),
            ),
            // The listing vouches for the tampered file's bytes; only its frontmatter differs.
            (
                skill(&other_description, FORMS),
                other_description.clone(),
                Some(format!(
                    "refused {ROOT}/SKILL.md: its frontmatter differs from the skill's listing in description"
                )),
            ),
            (
                dynamic,
                other_description.clone(),
                Some(format!(
                    "refused {ROOT}/SKILL.md: its frontmatter differs from the skill's listing in description"
                )),
            ),
            (
                skill(&extra_field, FORMS),
                extra_field,
                Some(format!(
                    "refused {ROOT}/SKILL.md: its frontmatter differs from the skill's listing in allowed-tools"
                )),
            ),
            (
                skill("Skill body.\n", FORMS),
                "Skill body.\n".to_owned(),
                Some(format!(
                    "refused {ROOT}/SKILL.md: it does not begin with a `---` frontmatter block"
                )),
            ),
        ];
        for (listing, served, expected) in cases {
            let outcome = verify_instructions(&listing, served.as_bytes());
            match (outcome, expected) {
                (Ok(text), None) => assert_eq!(text, served),
                (Err(error), Some(expected)) => {
                    let message = error.to_string();
                    assert_eq!(message, expected);
                    assert!(!message.contains("Evil") && !message.contains("Exfiltrate"));
                }
                (outcome, expected) => panic!("{served:?}: {outcome:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn a_supporting_file_is_read_only_when_the_skill_lists_it_and_it_matches() {
        let forms_uri = format!("{ROOT}/references/FORMS.md");
        let mut dynamic = skill(SKILL_MD, FORMS);
        dynamic.files = None;
        // (listing, the file asked for, what the server sends, the refusal, or None when given)
        let cases: Vec<(SkillInfo, &str, &str, Option<String>)> = vec![
            (skill(SKILL_MD, FORMS), "references/FORMS.md", FORMS, None),
            (skill(SKILL_MD, FORMS), forms_uri.as_str(), FORMS, None),
            (dynamic.clone(), "references/anything.md", "whatever\n", None),
            (
                skill(SKILL_MD, FORMS),
                "references/FORMS.md",
                "Supporting content!\n",
                Some(format!(
                    "refused {forms_uri}: its digest is {}, the skill's listing says {}",
                    digest("Supporting content!\n"),
                    digest(FORMS)
                )),
            ),
            (
                skill(SKILL_MD, FORMS),
                "references/FORMS.md",
                "Supporting.\n",
                Some(format!(
                    "refused {forms_uri}: it is 12 bytes, the skill's listing says {}",
                    FORMS.len()
                )),
            ),
            (
                skill(SKILL_MD, FORMS),
                "scripts/run.sh",
                "rm -rf /\n",
                Some(format!(
                    "refused {ROOT}/scripts/run.sh: the skill's listing does not include it, so it cannot be verified"
                )),
            ),
            (
                dynamic,
                "skill://other/SKILL.md",
                "x\n",
                Some(
                    "refused skill://other/SKILL.md: the skill's listing does not include it, so it cannot be verified"
                        .to_owned(),
                ),
            ),
        ];
        for (listing, file, served, expected) in cases {
            let outcome = file_uri(&listing, file)
                .and_then(|uri| verify_file(&listing, &uri, served.as_bytes()));
            match (outcome, expected) {
                (Ok(()), None) => {}
                (Err(error), Some(expected)) => assert_eq!(error.to_string(), expected),
                (outcome, expected) => panic!("{file}: {outcome:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn the_bytes_of_a_read_are_its_text_or_its_decoded_blob() {
        let uri = "skill://a/SKILL.md";
        let text = ResourceContents::text("hello", uri);
        let blob: ResourceContents =
            serde_json::from_value(json!({ "uri": uri, "blob": "aGVsbG8=" })).unwrap();
        let other = ResourceContents::text("other", "skill://a/other.md");
        let cases: Vec<(Vec<ResourceContents>, Result<&str, &str>)> = vec![
            (vec![text], Ok("hello")),
            (vec![blob], Ok("hello")),
            (vec![other.clone(), ResourceContents::text("hello", uri)], Ok("hello")),
            (vec![other], Ok("other")),
            (Vec::new(), Err("refused skill://a/SKILL.md: the server returned no content for it")),
        ];
        for (contents, expected) in cases {
            let outcome = bytes_of(uri, contents).map_err(|error| error.to_string());
            assert_eq!(
                outcome,
                expected.map(|text| text.as_bytes().to_vec()).map_err(str::to_owned)
            );
        }
    }
}

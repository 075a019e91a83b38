//! `orca skills`: list the skills an MCP server offers (the `io.modelcontextprotocol/skills`
//! extension), or load one by name and print its verified `SKILL.md` or one of its files. The
//! client SDK reads and verifies; this file only picks and prints.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;

use super::output::{print, print_error};
use super::tools::{Target, connect};
use crate::client::{McpClient, SkillInfo};
use crate::config::Env;

pub(super) const LONG_ABOUT: &str = "List the skills an MCP server offers (--stdio or --url; \
    the server must declare the io.modelcontextprotocol/skills extension): name, number of files \
    and description, read from skills/list without fetching any file. With a NAME, load that \
    skill: its SKILL.md is read and printed only when its size, sha256 digest and frontmatter \
    match the listing; any difference refuses the skill (exit 1) and says what differed. With \
    --file, print one of the loaded skill's files instead, verified the same way.\n\n\
    Examples:\n  orca skills --url http://127.0.0.1:9000/mcp\n  \
    orca skills pdf-processing --url http://127.0.0.1:9000/mcp\n  \
    orca skills pdf-processing --file references/FORMS.md --url http://127.0.0.1:9000/mcp";

#[derive(Debug, Args)]
pub(super) struct SkillsArgs {
    /// Load this skill (its name, or the URI of its SKILL.md) and print its SKILL.md
    #[arg(value_name = "NAME")]
    name: Option<String>,

    /// Print this file of the skill instead: its path under the skill (references/FORMS.md)
    /// or its URI
    #[arg(long, value_name = "PATH", requires = "name")]
    file: Option<String>,

    #[command(flatten)]
    target: Target,
}

pub(super) async fn skills(
    args: SkillsArgs,
    config_path: Option<&Path>,
    env: &Env,
) -> anyhow::Result<ExitCode> {
    let connection = connect(&args.target, config_path, env).await?;
    let outcome = run(&connection.client, &args).await;
    connection.close().await?;
    match outcome? {
        Ok(text) => {
            print(&text);
            Ok(ExitCode::SUCCESS)
        }
        Err(refusal) => {
            print_error(&format!("error: {refusal}"));
            Ok(ExitCode::from(1))
        }
    }
}

/// The text to print, or why the skill or file was refused or not found.
async fn run(client: &McpClient, args: &SkillsArgs) -> anyhow::Result<Result<String, String>> {
    let skills = match client.list_skills().await {
        Ok(skills) => skills,
        Err(error) => return Ok(Err(error.to_string())),
    };
    let Some(name) = &args.name else { return Ok(Ok(table(&skills))) };
    let Some(skill) = skills.iter().find(|skill| &skill.name == name || &skill.uri == name) else {
        let known: Vec<&str> = skills.iter().map(|skill| skill.name.as_str()).collect();
        return Ok(Err(format!("no skill `{name}`; the server's skills: {}", known.join(", "))));
    };
    let loaded = match client.load_skill(skill).await {
        Ok(loaded) => loaded,
        Err(refusal) => return Ok(Err(refusal.to_string())),
    };
    let Some(file) = &args.file else { return Ok(Ok(loaded.instructions().to_owned())) };
    match client.read_skill_file(&loaded, file).await {
        Ok(bytes) => Ok(match String::from_utf8(bytes) {
            Ok(text) => Ok(text),
            Err(bytes) => Err(format!(
                "{file} is verified but binary ({} bytes); it is not printed",
                bytes.into_bytes().len()
            )),
        }),
        Err(refusal) => Ok(Err(refusal.to_string())),
    }
}

fn table(skills: &[SkillInfo]) -> String {
    let rows: Vec<(String, String, String)> = skills
        .iter()
        .map(|skill| {
            let files = skill.files.as_ref().map_or("dynamic".to_owned(), |f| f.len().to_string());
            let line = skill.description.lines().next().unwrap_or_default().trim();
            let mut description: String = line.chars().take(100).collect();
            if line.chars().count() > 100 {
                description.push_str("...");
            }
            (skill.name.clone(), files, description)
        })
        .collect();
    let name_width = rows.iter().map(|row| row.0.chars().count()).max().unwrap_or(0).max(4);
    let files_width = rows.iter().map(|row| row.1.chars().count()).max().unwrap_or(0).max(5);
    let mut text = format!("{:name_width$}  {:files_width$}  DESCRIPTION\n", "NAME", "FILES");
    for (name, files, description) in rows {
        text.push_str(&format!("{name:name_width$}  {files:files_width$}  {description}\n"));
    }
    text.push_str(&format!("({} skills)", skills.len()));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_each_skill_with_its_number_of_files() {
        let skill = |name: &str, files: Option<usize>, description: &str| SkillInfo {
            uri: format!("skill://{name}/SKILL.md"),
            name: name.to_owned(),
            description: description.to_owned(),
            frontmatter: serde_json::Map::new(),
            files: files.map(|count| {
                (0..count)
                    .map(|i| crate::client::SkillFile {
                        uri: format!("skill://{name}/{i}"),
                        digest: String::new(),
                        size: 0,
                    })
                    .collect()
            }),
        };
        let skills = [
            skill("pdf-processing", Some(2), "Extract, fill, and assemble PDF documents"),
            skill("weather", None, "Today's weather\nand more"),
        ];
        assert_eq!(
            table(&skills),
            "NAME            FILES    DESCRIPTION\n\
             pdf-processing  2        Extract, fill, and assemble PDF documents\n\
             weather         dynamic  Today's weather\n\
             (2 skills)"
        );
    }
}

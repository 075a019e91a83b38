#!/usr/bin/env python3
"""Builds tools.json from git checkouts of the public repositories listed in SOURCES.md.

Usage: extract.py GITHUB_MCP_SERVER_GIT PLAYWRIGHT_MCP_GIT DOCKER_MCP_REGISTRY_GIT > tools.json
Each argument is a git directory; the files are read at HEAD with `git show`, so the
commits recorded in SOURCES.md are the ones read.
"""
import json, re, subprocess, sys

def show(git, path):
    return subprocess.run(["git", "--git-dir", git, "show", f"HEAD:{path}"],
                          check=True, capture_output=True, text=True).stdout

def files(git):
    out = subprocess.run(["git", "--git-dir", git, "ls-tree", "-r", "--name-only", "HEAD"],
                         check=True, capture_output=True, text=True).stdout
    return out.split("\n")

def github(git):
    tools = []
    for path in sorted(p for p in files(git) if p.startswith("pkg/github/__toolsnaps__/") and p.endswith(".snap")):
        snap = json.loads(show(git, path))
        tool = {"server": "github", "name": snap["name"], "description": snap.get("description", "")}
        title = (snap.get("annotations") or {}).get("title")
        if title:
            tool["title"] = title
        tool["inputSchema"] = snap.get("inputSchema") or {"type": "object"}
        tools.append(tool)
    return tools

def playwright(git):
    readme = show(git, "README.md")
    tools, current, seen = [], None, set()
    for line in readme.split("\n"):
        m = re.match(r"^- \*\*(browser_\w+)\*\*", line)
        if m:
            current = None
            if m.group(1) in seen:
                continue
            seen.add(m.group(1))
            current = {"server": "playwright", "name": m.group(1), "description": "",
                       "inputSchema": {"type": "object", "properties": {}, "required": []}}
            tools.append(current)
            continue
        if current is None:
            continue
        if m := re.match(r"^  - Title: (.*)", line):
            current["title"] = m.group(1).strip()
        elif m := re.match(r"^  - Description: (.*)", line):
            current["description"] = m.group(1).strip()
        elif m := re.match(r"^    - `(\w+)` \((\w+)(, optional)?\): (.*)", line):
            name, kind, optional, desc = m.groups()
            current["inputSchema"]["properties"][name] = {"type": kind, "description": desc.strip()}
            if not optional:
                current["inputSchema"]["required"].append(name)
        elif line.startswith("<!--") or line.startswith("### "):
            current = None
    for tool in tools:
        if not tool["inputSchema"]["required"]:
            del tool["inputSchema"]["required"]
    return tools

REGISTRY = {
    "okta-mcp-server": "okta", "stripe-remote": "stripe", "sqlite-mcp-server": "sqlite",
    "sonarqube": "sonarqube", "buildkite": "buildkite", "kubectl-mcp-server": "kubectl",
    "keboola-mcp": "keboola", "notion-remote": "notion", "maestro-mcp-server": "maestro",
    "simplechecklist": "checklist", "zerodha-kite": "kite", "webflow-remote": "webflow",
    "explorium": "explorium", "alfresco": "alfresco", "database-server": "dbserver",
    "neo4j": "neo4j", "gmail-mcp": "gmail", "sentry-remote": "sentry",
    "microsoft-learn": "mslearn", "ref": "ref", "arm-mcp": "arm",
    "vectra-ai-rux-mcp-server": "vectra",
}

def registry(git):
    tools = []
    for directory, server in REGISTRY.items():
        for entry in json.loads(show(git, f"servers/{directory}/tools.json")):
            properties, required = {}, []
            for argument in entry.get("arguments") or []:
                schema = {"type": argument.get("type", "string")}
                if argument.get("desc"):
                    schema["description"] = argument["desc"]
                properties[argument["name"]] = schema
                if not argument.get("optional"):
                    required.append(argument["name"])
            input_schema = {"type": "object", "properties": properties}
            if required:
                input_schema["required"] = required
            if entry.get("inputSchema"):
                input_schema = entry["inputSchema"]
            tools.append({"server": server, "name": entry["name"],
                          "description": entry.get("description", ""), "inputSchema": input_schema})
    return tools

if __name__ == "__main__":
    catalog = github(sys.argv[1]) + playwright(sys.argv[2]) + registry(sys.argv[3])
    json.dump(catalog, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")

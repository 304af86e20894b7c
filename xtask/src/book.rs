//! `cargo xtask book`: the guide (`docs/book`, an mdBook) built into `target/book` with mdbook
//! (installed on first use into `.cache/mdbook`, as cfn-guard and cargo-deny are), then
//! [`check`]ed. The check needs no mdbook and runs in `cargo test` too (this module's test): every
//! relative link of README.md and of the book's pages resolves to a file (and to a heading of it
//! when it names one), the book links nowhere outside the repository nor, but for an
//! `{{#include}}`, outside the book (the built book has no repository files: their paths are
//! written as code, `examples/pg-credit`), `SUMMARY.md` lists every
//! page, every page with a Rust snippet is a doctest of `docs/book/doctests.rs`, and the README's
//! first function is `examples/sqs-credit` as it is.

use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use crate::Result;

/// The pinned version of `mdbook`.
const MDBOOK: &str = "0.5.4";

/// The book's folder, from the checkout.
const BOOK: &str = "docs/book";

/// The example the README shows whole, from the checkout.
const FIRST_EXAMPLE: &str = "examples/sqs-credit/src/main.rs";

/// Builds the book and checks it.
pub(crate) fn run(root: &Path) -> Result<()> {
    let problems = check(root);
    if !problems.is_empty() {
        return Err(format!("the book: {}", problems.join("; ")));
    }
    let mdbook = crate::tools::installed(root, "mdbook", MDBOOK)?;
    let dest = crate::target_dir(root).join("book");
    crate::step(format!("building the book into {}", dest.display()));
    let status = Command::new(mdbook)
        .arg("build")
        .arg(root.join(BOOK))
        .arg("--dest-dir")
        .arg(&dest)
        .status()
        .map_err(|e| format!("mdbook: {e}"))?;
    if !status.success() {
        return Err(format!("mdbook build failed ({status})"));
    }
    println!(
        "xtask: book: built (mdbook {MDBOOK}) into {}; links, SUMMARY.md and doctests checked",
        dest.join("index.html").display()
    );
    Ok(())
}

/// What is wrong with the README and the book, one line each (nothing: all is well).
pub(crate) fn check(root: &Path) -> Vec<String> {
    let src = root.join(BOOK).join("src");
    let mut pages = Vec::new();
    markdown_files(&src, &mut pages);
    pages.sort();
    let mut problems = Vec::new();
    if pages.is_empty() {
        problems.push(format!("no pages in {}", src.display()));
    }
    let readme = root.join("README.md");
    for file in std::iter::once(&readme).chain(&pages) {
        let Ok(text) = fs::read_to_string(file) else {
            problems.push(format!("{}: unreadable", file.display()));
            continue;
        };
        let shown = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        let in_book = file != &readme;
        for (link, included) in links(&text) {
            let within = (in_book && !included).then_some(src.as_path());
            if let Some(problem) = link_problem(root, file, &link, in_book, within) {
                problems.push(format!("{shown}: {problem}"));
            }
        }
    }
    problems.extend(summary_problems(&src, &pages));
    problems.extend(doctest_problems(root, &readme, &pages));
    problems.extend(first_example_problems(root, &readme));
    problems
}

/// Every `.md` file under `dir`.
fn markdown_files(dir: &Path, into: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            markdown_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "md") {
            into.push(path);
        }
    }
}

/// `text` without its fenced code blocks (their lines blank), so that what a snippet holds is
/// never read as a link or a heading.
fn prose(text: &str) -> String {
    let mut fenced = false;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if !fenced {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The targets of `text`'s Markdown links and images (`[..](target)`, `[..](target "title")`)
/// and of mdBook's `{{#include target}}` (with `true`: included, not linked), outside code
/// blocks and inline code.
fn links(text: &str) -> Vec<(String, bool)> {
    let prose = prose(text);
    let mut found = Vec::new();
    for line in prose.lines() {
        // Inline code spans hold examples, not links: drop them.
        let plain: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, part)| part)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            found.push((target.to_owned(), false));
            rest = &rest[end..];
        }
        for part in line.split("{{#include ").skip(1) {
            let target = part.split("}}").next().unwrap_or("").trim();
            found.push((target.to_owned(), true));
        }
    }
    found
}

/// What is wrong with the link `target` of `file`, if anything; `within`, the folder the link
/// must stay in (the book's pages: the built book has nothing else).
fn link_problem(
    root: &Path,
    file: &Path,
    target: &str,
    in_book: bool,
    within: Option<&Path>,
) -> Option<String> {
    if target.is_empty() {
        return Some("an empty link".into());
    }
    if target.contains("://") || target.starts_with("mailto:") {
        return in_book.then(|| format!("{target} links outside the repository"));
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let resolved = if path.is_empty() {
        file.to_path_buf()
    } else {
        normalize(&file.parent().unwrap_or(root).join(path))
    };
    if !resolved.starts_with(root) {
        return Some(format!("{target} leaves the repository"));
    }
    if within.is_some_and(|book| !resolved.starts_with(book)) {
        let path = resolved.strip_prefix(root).unwrap_or(&resolved).display();
        return Some(format!(
            "{target} is outside the book, so the built book has no such page: write the path \
             as code (`{path}`)"
        ));
    }
    if !resolved.exists() {
        return Some(format!("{target}: no such file"));
    }
    let anchor = anchor?;
    if resolved.extension().is_none_or(|e| e != "md") {
        return None;
    }
    let text = fs::read_to_string(&resolved).unwrap_or_default();
    if anchors(&text).iter().any(|a| a == anchor) {
        None
    } else {
        Some(format!("{target}: no heading #{anchor}"))
    }
}

/// `path` with its `.` and `..` parts resolved (without touching the file system).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The anchors of `text`'s headings, as mdBook and GitHub write them: lower case, letters,
/// digits, `-` and `_` kept, spaces made `-`, the rest dropped.
fn anchors(text: &str) -> Vec<String> {
    prose(text)
        .lines()
        .filter_map(|line| {
            let title = line.trim_start_matches('#');
            (title.len() < line.len() && title.starts_with(' ')).then_some(title.trim())
        })
        .map(|title| {
            title
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => {
                        Some(c.to_lowercase().next().unwrap_or(c))
                    }
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// The pages `SUMMARY.md` does not list, and what it lists that is no page.
fn summary_problems(src: &Path, pages: &[PathBuf]) -> Vec<String> {
    let summary = src.join("SUMMARY.md");
    let Ok(text) = fs::read_to_string(&summary) else {
        return vec![format!("{}: unreadable", summary.display())];
    };
    let listed: Vec<PathBuf> = links(&text)
        .iter()
        .map(|(l, _)| normalize(&src.join(l)))
        .collect();
    pages
        .iter()
        .filter(|p| **p != summary && !listed.contains(p))
        .map(|p| {
            let page = p.strip_prefix(src).unwrap_or(p).display();
            format!("SUMMARY.md does not list {page}")
        })
        .collect()
}

/// The files with a Rust snippet that `docs/book/doctests.rs` does not include.
fn doctest_problems(root: &Path, readme: &Path, pages: &[PathBuf]) -> Vec<String> {
    let book = root.join(BOOK);
    let doctests = fs::read_to_string(book.join("doctests.rs")).unwrap_or_default();
    let included: Vec<PathBuf> = doctests
        .split("= \"")
        .skip(1)
        .filter_map(|part| part.split('"').next())
        .map(|path| normalize(&book.join(path)))
        .collect();
    std::iter::once(readme)
        .chain(pages.iter().map(PathBuf::as_path))
        .filter(|file| {
            let text = fs::read_to_string(file).unwrap_or_default();
            text.lines().any(|l| l.trim_start().starts_with("```rust"))
        })
        .filter(|file| !included.iter().any(|i| i == file))
        .map(|file| {
            let shown = file.strip_prefix(root).unwrap_or(file).display();
            format!("{shown} has Rust snippets that docs/book/doctests.rs does not include")
        })
        .collect()
}

/// The README's first Rust snippet is [`FIRST_EXAMPLE`] as it is, from its first `use` to its
/// end: what its doctest compiles and runs is what `cargo test -p example-sqs-credit` does.
fn first_example_problems(root: &Path, readme: &Path) -> Vec<String> {
    let text = fs::read_to_string(readme).unwrap_or_default();
    let example = fs::read_to_string(root.join(FIRST_EXAMPLE)).unwrap_or_default();
    let snippet = text
        .split("```rust")
        .nth(1)
        .and_then(|rest| rest.split_once('\n'))
        .and_then(|(_, body)| body.split("```").next());
    match snippet {
        Some(body) if !body.trim().is_empty() && example.trim_end().ends_with(body.trim_end()) => {
            Vec::new()
        }
        _ => vec![format!(
            "README.md's first Rust snippet is not the end of {FIRST_EXAMPLE} as it is"
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checkout's README and book, as they are.
    #[test]
    fn the_readme_and_the_book_link_to_files_that_exist_and_list_every_page() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let root = normalize(&std::env::current_dir().expect("cwd").join(root));
        let problems = check(&root);
        assert!(problems.is_empty(), "{problems:#?}");
    }

    /// A book in a temporary folder: `files` written under it.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str, files: &[(&str, &str)]) -> Self {
            let dir =
                std::env::temp_dir().join(format!("xtask-book-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            for (path, text) in files {
                let path = dir.join(path);
                fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
                fs::write(path, text).expect("write");
            }
            Self(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    const EXAMPLE: &str = "//! Run with it.\n\nfn main() {}\n";

    /// A checkout whose README and book are whole, with `page` as the book's one page besides
    /// the introduction.
    fn book(name: &str, readme: &str, summary: &str, page: &str) -> Scratch {
        Scratch::new(
            name,
            &[
                ("README.md", readme),
                (FIRST_EXAMPLE, EXAMPLE),
                ("docs/book/doctests.rs", "Readme = \"../../README.md\";"),
                ("docs/book/src/SUMMARY.md", summary),
                ("docs/book/src/intro.md", "# Intro\n\n## A part, `code`\n"),
                ("docs/book/src/doors/page.md", page),
            ],
        )
    }

    const README: &str =
        "# R\n\n```rust\nfn main() {}\n```\n\n[guide](docs/book/src/intro.md#a-part-code)\n";
    const SUMMARY: &str = "[Intro](intro.md)\n- [Page](doors/page.md)\n";

    /// Checks a whole book whose page is `page` and asserts it finds exactly two problems,
    /// the first containing `expected[0]`, the second `expected[1]`.
    fn assert_two_problems(name: &str, page: &str, expected: [&str; 2]) {
        let b = book(name, README, SUMMARY, page);
        let problems = check(&b.0);
        assert_eq!(problems.len(), 2, "{problems:?}");
        for (problem, part) in problems.iter().zip(expected) {
            assert!(problem.contains(part), "{problems:?}");
        }
    }

    #[test]
    fn a_whole_book_passes() {
        let b = book(
            "whole",
            README,
            SUMMARY,
            "[intro](../intro.md) `[not](a-link.md)`\n",
        );
        assert_eq!(check(&b.0), Vec::<String>::new());
    }

    #[test]
    fn a_link_to_a_missing_file_or_heading_is_refused() {
        assert_two_problems(
            "missing",
            "[gone](../gone.md) [part](../intro.md#no-part)\n",
            ["../gone.md: no such file", "no heading #no-part"],
        );
    }

    #[test]
    fn a_link_outside_the_repository_is_refused_in_the_book() {
        assert_two_problems(
            "outside",
            "[web](https://example.com/) [up](../../../../../x.md)\n",
            ["links outside the repository", "leaves the repository"],
        );
    }

    /// A link from a page to a file of the repository outside the book works on GitHub and
    /// nowhere in the built book; the README may, and a page may include such a file.
    #[test]
    fn a_link_from_the_book_to_a_repository_file_is_refused() {
        let page = "[ex](../../../../examples/sqs-credit/src/main.rs) \
                    [readme](../../../../README.md)\n\n\
                    {{#include ../../../../examples/sqs-credit/src/main.rs}}\n";
        let readme = format!("{README}[ex](examples/sqs-credit/src/main.rs)\n");
        let b = book("repository", &readme, SUMMARY, page);
        let problems = check(&b.0);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("is outside the book")
                && problems[0].contains("`examples/sqs-credit/src/main.rs`"),
            "{problems:?}"
        );
        assert!(problems[1].contains("`README.md`"), "{problems:?}");
    }

    #[test]
    fn a_page_summary_md_does_not_list_is_refused() {
        let b = book("unlisted", README, "[Intro](intro.md)\n", "# Page\n");
        assert_eq!(check(&b.0), ["SUMMARY.md does not list doors/page.md"]);
    }

    #[test]
    fn a_rust_snippet_outside_the_doctests_is_refused() {
        let b = book("snippet", README, SUMMARY, "```rust\nfn main() {}\n```\n");
        let problems = check(&b.0);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("doors/page.md has Rust snippets"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_first_function_that_is_not_the_example_is_refused() {
        let readme = README.replace("fn main() {}", "fn main() { changed() }");
        let b = book("first", &readme, SUMMARY, "# Page\n");
        let problems = check(&b.0);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("is not the end of"), "{problems:?}");
    }
}

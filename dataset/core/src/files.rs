//! The one I/O helper of the crate (feature `fs`, for the native shells: CLI, prerenderer,
//! tests, benchmarks): reads a data directory into the `(path, text)` pairs `load` takes.

use std::path::Path;

/// Every file under `dir` (hidden files and README.md skipped), as (path relative to `dir` with
/// '/' separators, contents), sorted by path.
pub fn read_tree(dir: &Path) -> Result<Vec<(String, String)>, String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) -> Result<(), String> {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with('.') || name == "README.md" {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out)?;
            } else {
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let rel = path.strip_prefix(root).unwrap().components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
                out.push((rel, text));
            }
        }
        Ok(())
    }
    if !dir.is_dir() {
        return Err(format!("data directory {} does not exist (pass --data DIR)", dir.display()));
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    out.sort();
    Ok(out)
}

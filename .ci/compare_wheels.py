"""Exit 1 unless two wheels hold the same files with the same contents (the
wheel built from the sdist against the one built from the tree); print the
wheel's file list either way, for the CI log."""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path


def contents(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as archive:
        return {
            info.filename: hashlib.sha256(archive.read(info)).hexdigest()
            for info in archive.infolist()
            if not info.is_dir()
        }


def main(from_tree: Path, from_sdist: Path) -> int:
    tree, sdist = contents(from_tree), contents(from_sdist)
    with zipfile.ZipFile(from_tree) as archive:
        for info in archive.infolist():
            print(f"{info.file_size:>9}  {info.filename}")
    print(f"{len(tree)} files in {from_tree.name}")
    only_tree, only_sdist = sorted(tree.keys() - sdist.keys()), sorted(sdist.keys() - tree.keys())
    changed = sorted(name for name in tree.keys() & sdist.keys() if tree[name] != sdist[name])
    for label, names in (
        ("only in the wheel from the tree", only_tree),
        ("only in the wheel from the sdist", only_sdist),
        ("different contents", changed),
    ):
        for name in names:
            print(f"{label}: {name}", file=sys.stderr)
    if only_tree or only_sdist or changed:
        print("the sdist does not build the same wheel", file=sys.stderr)
        return 1
    print("the sdist builds the same wheel (same files, same contents)")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))

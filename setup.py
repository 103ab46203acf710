"""Maps the top-level folders into the ``rubricgym`` namespace (``adapters/`` becomes
``rubricgym.adapters`` and so on); everything else is in pyproject.toml.

Folders that hold only data (ALFWorld's games, the SearchQA and WebShop data) are listed as
packages too: setuptools ships a folder's files only as part of a package it was told of."""

from setuptools import find_namespace_packages, setup

FOLDERS = {
    "rubricgym": "rubricgym",
    "rubricgym.adapters": "adapters",
    "rubricgym.trainers": "trainers",
    "rubricgym.operator_libraries": "operator_libraries",
}
DATA = ["*.yaml", "*.yml", "*.json", "*.jsonl", "*.md", "*.txt", "*.tw-pddl", "*.pddl", "*.twl2", "*.html"]

packages: list[str] = []
package_dir: dict[str, str] = {}
for package, folder in FOLDERS.items():
    package_dir[package] = folder
    packages.append(package)
    for sub in find_namespace_packages(folder, exclude=["tests", "tests.*", "*__pycache__*"]):
        package_dir[f"{package}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"
        packages.append(f"{package}.{sub}")

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={"": DATA + [f"**/{p}" for p in DATA]},
    include_package_data=True,
)

"""Package layout (metadata lives in pyproject.toml).

The repository keeps `tasks/`, `reward/` and `agents/` at its top, but they install and
import under the project's namespace: `argus_env.tasks`, `argus_env.reward`,
`argus_env.agents`. No generic top-level name (`tasks`, `agents`, ...) is claimed, so a
user's own `tasks.py` cannot shadow them.
"""

from setuptools import find_namespace_packages, setup

ROOTS = {"argus_env": "argus_env", "argus_env.tasks": "tasks", "argus_env.reward": "reward",
         "argus_env.agents": "agents"}

packages, package_dir = [], {}
for name, folder in ROOTS.items():
    package_dir[name] = folder
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in
                 find_namespace_packages(folder, exclude=["__pycache__", "*.__pycache__"])]

setup(packages=packages, package_dir=package_dir)

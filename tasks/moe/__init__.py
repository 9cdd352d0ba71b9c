"""MoE: the expert layer of a mixture-of-experts block as an Argus task. Importing this
package registers it."""

from .task import TASK, MoETask  # noqa: F401

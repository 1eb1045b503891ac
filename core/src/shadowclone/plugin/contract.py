"""The run contract, where a plugin finds it: defined in `shadowclone.contract`, outside this
package, so that the run program's entry point reads it without importing the plugin API."""

from shadowclone.contract import *  # noqa: F403

"""The names of secrets: files that hold keys or credentials, variables named like tokens.

Learning writes such a right commented out (``_host.learning``), and no message of either
side prints a ready-to-paste grant of one (``_inside.enforce.Messages``, the exit
summary): granting a secret is a deliberate edit. Data only; the caller says where the
homes are (the trusted side knows them all, the sandbox only its own names).
"""

from __future__ import annotations

from pysandboxes._policy.pathnames import within

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

#: Files of a home that hold keys and credentials (relative to the home).
HOME_FILES = (
    ".ssh/", ".aws/", ".gnupg/", ".netrc", ".git-credentials", ".pgpass", ".docker/config.json",
    ".kube/config", ".config/gcloud/", ".azure/", ".password-store/", ".pypirc", ".npmrc",
)  # fmt: skip
#: Files of the system that hold password hashes or host keys.
SYSTEM_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh/ssh_host_")
_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".keystore", ".kdbx")
_NAMES = ("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".env", "credentials")
#: Words in a variable's name that say it holds a secret.
_WORDS = ("SECRET", "PASSWORD", "PASSWD", "TOKEN", "CREDENTIAL", "PRIVATE")

#: Where the docs say how to grant a secret on purpose.
DOCS = "docs/learning.md#secrets"


def secret_path(path: str, homes: Iterable[str] | None = None) -> bool:
    """Whether ``path`` holds keys or credentials. ``homes``: the homes whose
    ``.ssh/``, ``.aws/``... are secrets; ``None`` (the sandbox, which may not list
    ``/home``): such an entry anywhere in the path counts, so that a message errs
    towards naming a secret, never towards printing its grant."""
    name = path.rstrip("/").rpartition("/")[2]
    if name in _NAMES or name.endswith(_SUFFIXES) or name.startswith(".env."):
        return True
    if path.startswith(SYSTEM_FILES):
        return True
    if homes is None:
        return any(
            f"/{entry}" in path or path.endswith(f"/{entry.rstrip('/')}") for entry in HOME_FILES
        )
    return any(
        within(path, home) and path[len(home) + 1 :].startswith(HOME_FILES) for home in homes
    )


def secret_name(name: str) -> bool:
    """Whether a variable is named like a secret (``*_TOKEN``, ``*_KEY``, ``*SECRET*``...)."""
    upper = name.upper()
    return any(word in upper for word in _WORDS) or upper.endswith(("_KEY", "APIKEY"))

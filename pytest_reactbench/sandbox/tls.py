"""Downloads behind a proxy that re-signs certificates, or a registry without npm
signatures: the environment that makes the tools trust a CA bundle, and the hint a
failed download gets. Imports nothing of pytest_reactbench."""

from __future__ import annotations


def tls_hint(output: str) -> str:
    """A line telling how to fix a download that failed TLS verification, or that a
    package manager refused for want of npm's signatures; or ''."""
    markers = ("UNABLE_TO_GET_ISSUER_CERT", "SELF_SIGNED_CERT", "CERT_HAS_EXPIRED",
               "certificate verify failed", "unable to get local issuer certificate")
    if any(m in output for m in markers):
        return ("\nhint: downloads failed TLS verification; behind a proxy that re-signs "
                "certificates, name its CA bundle: REACTBENCH_CA_BUNDLE=PATH in the environment "
                "(every command reads it; pytest also takes --reactbench-ca-bundle=PATH)")
    unsigned = ("registry signature could not be verified",  # pnpm's switch to a pinned version
                "No compatible signature found in package metadata")  # corepack
    if any(m in output for m in unsigned):
        return ("\nhint: the package registry serves no npm signatures (a mirror or proxy may "
                "strip them); if you trust it, set REACTBENCH_UNSIGNED_REGISTRY=1 in the "
                "environment (every command reads it, `reactbench mine` included; pytest also "
                "takes --reactbench-unsigned-registry)")
    return ""


def ca_env(path: str) -> dict[str, str]:
    """Environment that makes npm, Node, git, curl and pip trust a CA bundle."""
    return {
        "NODE_EXTRA_CA_CERTS": path,
        "npm_config_cafile": path,
        "SSL_CERT_FILE": path,
        "GIT_SSL_CAINFO": path,
        "CURL_CA_BUNDLE": path,
        "PIP_CERT": path,
    }

"""What the deploy files say about each other and about the docs: one image
tag everywhere, a Redis for the k8s base at the URL its Secret names, and no
pointer to a README section or docs page that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
IMAGE = "derender-queue:local"


def k8s(kind: str, name: str) -> dict:
    for path in K8S.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == kind and doc["metadata"]["name"] == name:
                return doc
    raise AssertionError(f"no {kind}/{name} in deploy/k8s")


def test_one_image_tag_for_build_compose_and_k8s():
    assert f"-t {IMAGE} " in (ROOT / "deploy" / "Dockerfile").read_text()
    assert yaml.safe_load((ROOT / "docker-compose.yml").read_text())["x-derender-image"]["image"] == \
        f"${{DERENDER_IMAGE:-{IMAGE}}}"
    for name in ("derender-api", "derender-worker"):
        (container,) = k8s("Deployment", name)["spec"]["template"]["spec"]["containers"]
        assert container["image"] == IMAGE, name
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert kustomization["images"] == [{"name": "derender-queue", "newTag": IMAGE.split(":")[1]}]
    assert f"docker build -f deploy/Dockerfile -t {IMAGE} ." in (ROOT / "docs" / "deployment.md").read_text()


def test_the_k8s_base_brings_the_redis_its_secret_names():
    url = k8s("Secret", "derender-redis")["stringData"]["DERENDER_REDIS_URL"]
    host = re.match(r"redis://([^:/]+):(\d+)/", url)
    assert host, url
    service, namespace = host.group(1).split(".")[:2]
    assert namespace == yaml.safe_load((K8S / "kustomization.yaml").read_text())["namespace"]
    svc = k8s("Service", service)["spec"]
    assert [p["port"] for p in svc["ports"]] == [int(host.group(2))]
    redis = k8s("StatefulSet", service)["spec"]
    assert svc["selector"].items() <= redis["template"]["metadata"]["labels"].items()
    (container,) = redis["template"]["spec"]["containers"]
    compose_args = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["redis"]["command"]

    def flags(args: list[str]) -> dict[str, str]:
        # compose may take a value from the environment: compare its default (`${VAR:-default}`)
        return {a: re.sub(r"^\$\{\w+:-(.*)\}$", r"\1", b) for a, b in zip(args[1::2], args[2::2], strict=False)
                if a in ("--appendonly", "--appendfsync", "--maxmemory-policy", "--save", "--dir")}

    assert flags(container["args"]) == flags(compose_args), "the same persistence and eviction as compose's redis"
    compose_env = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["redis"]["environment"]
    assert {e["name"]: e["value"] for e in container["env"]} == compose_env, "the same allocator settings"
    assert redis["volumeClaimTemplates"][0]["metadata"]["name"] in {m["name"] for m in container["volumeMounts"]}


def headings(page: str) -> set[str]:
    text = (ROOT / page).read_text()
    return {m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def pointing_files() -> list[Path]:
    found = [*ROOT.glob("deploy/**/*"), ROOT / "docker-compose.yml", ROOT / "pyproject.toml", ROOT / ".ci" / "run",
             *ROOT.glob("*/**/*.py")]
    return [path for path in found if path.is_file() and ".venv" not in path.parts
            and path.suffix in (".py", ".yaml", ".yml", ".toml", ".sh", ".env", "")]


def test_pointers_to_readme_and_docs_name_real_pages_and_sections():
    """`README "Architecture"`, `docs/wire-format.md "Wire format v2"`, `(docs/observability.md,
    Metrics)` and a bare `docs/sentinel.md` in code, deploy files and tests must name a page that
    exists and, where they name one, a section of it."""
    pointers, pages = [], []
    for path in pointing_files():
        text = path.read_text(errors="replace")
        pointers += [(path, m.group(1), m.group(2))
                     for m in re.finditer(r'(README|docs/[\w-]+\.md)(?:\'s)?,? "([A-Z][^"]+)"', text)]
        pointers += [(path, m.group(1), m.group(2))
                     for m in re.finditer(r"\((README|docs/[\w-]+\.md), ([A-Z][\w ]+)\)", text)]
        pages += [(path, m.group(0)) for m in re.finditer(r"\bdocs/[\w-]+\.md\b", text)]
    assert pointers and pages, "the patterns find the pointers"
    gone = [(str(p.relative_to(ROOT)), page) for p, page in pages if not (ROOT / page).is_file()]
    assert not gone, f"pointers to docs pages that do not exist: {gone}"
    missing = []
    for path, page, section in pointers:
        section = " ".join(section.split())  # a pointer may wrap
        found = headings("README.md" if page == "README" else page)
        # ("Wire format" names "Wire format v2"; "Redis Sentinel" names "Redis Sentinel: failover and ...")
        if not any(h == section or h.startswith((section + " ", section + ":")) for h in found):
            missing.append((str(path.relative_to(ROOT)), page, section))
    assert not missing, f"pointers to sections that do not exist: {missing}"

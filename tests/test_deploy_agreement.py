"""What the deploy files say about each other and about README: one image tag
everywhere, a Redis for the k8s base at the URL its Secret names, and no
pointer to a README section that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
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
    assert f"docker build -f deploy/Dockerfile -t {IMAGE} ." in (ROOT / "README.md").read_text()


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


def readme_headings() -> set[str]:
    text = (ROOT / "README.md").read_text()
    return {m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def test_pointers_to_readme_sections_name_real_sections():
    headings = readme_headings()
    pointers = []
    for path in [*ROOT.glob("deploy/**/*"), ROOT / "docker-compose.yml", *ROOT.glob("*/**/*.py")]:
        if not path.is_file() or ".venv" in path.parts or path.suffix not in (".py", ".yaml", ".yml", ""):
            continue
        text = path.read_text(errors="replace")
        pointers += [(path, m.group(1)) for m in re.finditer(r'README(?:\'s)?,? "([A-Z][^"]+)"', text)]
        pointers += [(path, m.group(1)) for m in re.finditer(r"\(README, ([A-Z][\w ]+)\)", text)]
    assert pointers, "the pattern finds the pointers"
    pointers = [(p, " ".join(section.split())) for p, section in pointers]  # a pointer may wrap
    missing = [(str(p.relative_to(ROOT)), section) for p, section in pointers
               if not any(h == section or h.startswith((section + " ", section + ":")) for h in headings)]
    # ("Wire format" names "Wire format v1"; "Redis Sentinel" names "Redis Sentinel: failover and ...")
    assert not missing, f"pointers to README sections that do not exist: {missing}"

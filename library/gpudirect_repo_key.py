#!/usr/bin/python
"""Fetch a repository signing key, check it against pinned fingerprints, then install it."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpudirect_repo_key
short_description: Install a repository signing key only when its fingerprint is one of the pinned ones
description:
  - Downloads the key from O(url) into memory (no temporary file), reads the fingerprints of its primary keys
    (OpenPGP v4 and v6, armoured or binary; no gpg needed) and compares them with O(fingerprints).
  - Only when every primary key of the file is pinned does it write O(dest) (atomically, C(changed) only when the
    content differs). On a mismatch it fails naming the fingerprints found, the pinned ones and the knob, and writes
    nothing.
  - A binary key written to a O(dest) ending in C(.asc) is armoured first (apt reads C(*.asc) keyrings only armoured).
  - Runs on every play, so a key rotated on the server is fetched and checked again instead of being kept forever.
  - O(url) must be C(https://) or C(file:///); C(http://) only with O(allow_http).
options:
  url:
    description: Where the key is (C(https://), C(file:///), or C(http://) with O(allow_http)).
    type: str
    required: true
  dest:
    description: The keyring file apt (C(signed-by=)) or dnf (C(gpgkey=file://)) reads.
    type: path
    required: true
  fingerprints:
    description: Pinned fingerprints (40 or 64 hex digits; blanks and case ignored).
    type: list
    elements: str
    required: true
  allow_http:
    description: Accept a plain C(http://) URL (an internal mirror).
    type: bool
    default: false
  knob:
    description: Name of the variable holding O(fingerprints), for the messages.
    type: str
    default: fingerprints
  url_knob:
    description: Name of the variable holding O(url), for the messages.
    type: str
    default: url
  http_knob:
    description: Name of the variable that allows http, for the messages.
    type: str
    default: allow_http
  mode:
    description: Mode of O(dest).
    type: str
    default: "0644"
  timeout:
    description: Seconds for the download.
    type: int
    default: 30
author:
  - GPUDirect RDMA toolkit maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Install the CUDA repository key after checking its fingerprint
  gpudirect_repo_key:
    url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub
    dest: /etc/apt/keyrings/cuda-archive-keyring.asc
    fingerprints: [EB693B3035CD5710E231E123A4B469963BF863CC]
    knob: gpudirect_nvidia_driver_repo_key_fingerprints
"""

RETURN = r"""
fingerprints:
  description: Fingerprints of the primary keys found in the downloaded file.
  returned: when the key was read
  type: list
  elements: str
dest:
  description: The keyring file.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.gpudirect_host import write_beside
from ansible.module_utils.gpudirect_openpgp import armor, is_armored, normalise, primary_fingerprints
from ansible.module_utils.urls import fetch_url, open_url


def _download(module, url):
    if url.startswith("file://"):
        try:
            handle = open_url(url, timeout=module.params["timeout"])
            return handle.read()
        except Exception as exc:  # noqa: BLE001 - any failure to read a file:// URL is reported as such
            module.fail_json(msg="%s=%s cannot be read: %s" % (module.params["url_knob"], url, to_native(exc)))
    response, info = fetch_url(module, url, timeout=module.params["timeout"])
    if info.get("status") != 200 or response is None:
        module.fail_json(msg="%s=%s could not be downloaded: HTTP %s %s" % (
            module.params["url_knob"], url, info.get("status"), info.get("msg", "")))
    return response.read()


def run(module):
    params = module.params
    url, dest = params["url"], params["dest"]
    result = {"changed": False, "dest": dest}
    if not (url.startswith("https://") or url.startswith("file:///")
            or (url.startswith("http://") and params["allow_http"])):
        module.fail_json(msg="%s=%s: the key must come over https:// or from file:///; http:// only with %s: true"
                         % (params["url_knob"], url, params["http_knob"]), **result)
    pinned = [normalise(f) for f in params["fingerprints"]]
    bad = [f for f in pinned if len(f) not in (40, 64) or any(c not in "0123456789ABCDEF" for c in f)]
    if not pinned or bad:
        module.fail_json(msg="%s must list full OpenPGP fingerprints (40 or 64 hex digits); not valid: %s"
                         % (params["knob"], bad or "(empty list)"), **result)
    data = _download(module, url)
    try:
        found = primary_fingerprints(data)
    except ValueError as exc:
        module.fail_json(msg="%s=%s is not an OpenPGP public key file: %s" % (params["url_knob"], url, exc), **result)
    result["fingerprints"] = found
    unpinned = [f for f in found if f not in pinned]
    if unpinned:
        module.fail_json(msg="the key at %s=%s has fingerprint(s) %s, not among %s=%s; nothing was installed. If the "
                             "vendor rotated its key, check the new fingerprint against the vendor's published one and "
                             "add it to %s" % (params["url_knob"], url, ", ".join(unpinned), params["knob"],
                                               pinned, params["knob"]), **result)
    if dest.endswith(".asc") and not is_armored(data):
        data = armor(data)          # apt reads a signed-by file named *.asc only when it is armoured
    current = None
    if os.path.exists(dest):
        with open(dest, "rb") as handle:
            current = handle.read()
    if current == data:
        mode = int(params["mode"], 8)
        if (os.stat(dest).st_mode & 0o7777) != mode:
            result["changed"] = True
            if not module.check_mode:
                os.chmod(dest, mode)
        return result
    result["changed"] = True
    if module.check_mode:
        return result
    write_beside(dest, data, int(params["mode"], 8), ".gpudirect-key-", lambda tmp: module.atomic_move(tmp, dest))
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            dest=dict(type="path", required=True),
            fingerprints=dict(type="list", elements="str", required=True),
            allow_http=dict(type="bool", default=False),
            knob=dict(type="str", default="fingerprints"),
            url_knob=dict(type="str", default="url"),
            http_knob=dict(type="str", default="allow_http"),
            mode=dict(type="str", default="0644"),
            timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()

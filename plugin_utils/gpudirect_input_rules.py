"""Rules for the role variables that become paths, unit names, repository lines, argv,
package names or timeouts.

One implementation, used by the ``gpudirect_input_errors`` filter (each role's
``tasks/validate.yml``, the first thing the role runs) and by the unit tests.
A rule is a dict: ``{"knob": NAME, "value": VALUE, "rule": KIND, ...options}``;
``check(rule)`` returns a list of messages, each naming the knob, the bad value
and what is allowed (empty when the value is good).

Kinds and their options:

``path``       absolute path, normalised (no ``..``, ``.`` or ``//``), no control
               characters, under one of ``under`` (list of directories) and, with
               ``suffix``, ending in it. ``optional: true`` accepts ``""``. Blanks, quotes,
               ``$ ; \\`` are refused too unless ``plain: false`` (controller paths).
``paths``      list of ``path`` (same options).
``source``     an ``url`` when it has ``://``, else a ``path`` on the controller (``allow_http``,
               ``http_knob``, ``optional``).
``filename``   one file name (no ``/``), letters digits ``._@+-``, with ``suffix``.
``unit``       systemd unit name (systemd.unit(5)): ``[A-Za-z0-9:_.\\-@]``, at most
               255 characters, one of the unit type suffixes (or ``suffixes``).
``units``      list of ``unit``.
``url``        ``https://`` or ``file://`` (``http://`` only with ``allow_http``),
               no blanks or control characters; ``optional: true`` accepts ``""``.
``repo_component``  one directory name in a repository URL (``ubuntu24.04``, ``2.9.1``) or a
               repository id; ``repo_components`` a list of them.
``argv``       a list (not a string) of strings without NUL/newline; ``min`` items.
``packages``   list of package names (Debian policy and RPM's name characters).
``timeout``    integer seconds (or a string of digits), ``min`` (default 1) to ``max``.
``text``       a string without control characters (tab allowed with ``allow_tab``).
``texts``      list of ``text``.
``controller`` (any kind) marks a value on the controller, not the node: ignored here; the
               unit tests accept a ``path`` without ``under`` only with it.
``hint``       (any kind) text appended to each message: what to do.
``fingerprints``  list of OpenPGP fingerprints, 40 (v4) or 64 (v6) hex digits, at least one.
``kernel_release``  a kernel release as ``uname -r`` prints it (module_utils/gpudirect_kernel.py
               ``release_problem``): one path component, never ``.``, ``..``, a ``/``, a blank or
               a shell character; ``optional: true`` accepts ``""``. ``kernel_releases`` a list.
``package_version``  a package version as apt and rpm print it (``6.1.192-2``,
               ``5.14.0-427.13.1.el9_4``; ``package_version_problem`` there), or a mapping
               package name: version; ``""`` and ``{}`` are accepted (none given).
"""

from __future__ import annotations

import re

from ansible.module_utils.gpudirect_kernel import package_version_problem, release_problem

UNIT_SUFFIXES = (".service", ".socket", ".device", ".mount", ".automount", ".swap", ".target",
                 ".path", ".timer", ".slice", ".scope")
_UNIT_CHARS = re.compile(r"^[A-Za-z0-9:_.\\@-]+\Z")
# \Z, never $: "$" also matches before a trailing newline, which is what these rules refuse.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_FILENAME = re.compile(r"^[A-Za-z0-9_.@+-]+\Z")
_REPO_COMPONENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*\Z")
# Debian policy 5.6.7 (lower case, digits, + - .), RPM also allows upper case and _ ;
# one character set for both, never a blank, a leading '-' or an option-like value.
_PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._-]*\Z")
_FINGERPRINT = re.compile(r"^([0-9A-Fa-f]{40}|[0-9A-Fa-f]{64})\Z")
RULE_KINDS = ("path", "paths", "source", "filename", "unit", "units", "url", "repo_component", "repo_components",
              "argv", "packages", "timeout", "text", "texts", "fingerprints", "kernel_release", "kernel_releases",
              "package_version")


def _show(value):
    """The value as the message shows it: repr, so that a newline or NUL is visible."""
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _control(value):
    return bool(_CONTROL.search(value))


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _text(knob, value, allow_empty=True, allow_tab=False):
    if not isinstance(value, str):
        return ["%s=%s must be a string, got %s" % (knob, _show(value), type(value).__name__)]
    probe = value.replace("\t", "") if allow_tab else value
    if _control(probe):
        return ["%s=%s contains a control character (newline, carriage return, NUL, ...): "
                "none is allowed in a value that reaches a file, a unit or a repository line" % (knob, _show(value))]
    if not allow_empty and not value:
        return ["%s must not be empty" % knob]
    return []


def _list(knob, value, what):
    if isinstance(value, (list, tuple)):
        return []
    return ["%s=%s must be a YAML list of %s, got a %s" % (knob, _show(value), what, type(value).__name__)]


def _each(knob, value, what, check, **kwargs):
    """A list of `what`, each item checked by check(knob[index], item, **kwargs)."""
    errors = _list(knob, value, what)
    if errors:
        return errors
    found = []
    for index, item in enumerate(value):
        found.extend(check("%s[%d]" % (knob, index), item, **kwargs))
    return found


def check_path(knob, value, under=(), suffix="", optional=False, plain=True):
    if optional and value == "":
        return []
    errors = _text(knob, value, allow_empty=False)
    if errors:
        return errors
    where = (" under " + " or ".join(d.rstrip("/") + "/" for d in under)) if under else ""
    if not value.startswith("/"):
        return ["%s=%s must be an absolute path%s" % (knob, _show(value), where)]
    parts = value.split("/")[1:]
    if any(p in ("", ".", "..") for p in parts):
        return ["%s=%s must be a normalised absolute path (no '..', '.', '//' or trailing '/')%s"
                % (knob, _show(value), where)]
    if plain and any(c in value for c in " \"'`$;\\"):
        return ["%s=%s must not contain blanks, quotes, '$', ';' or '\\'" % (knob, _show(value))]
    if under and not any(value.startswith(d.rstrip("/") + "/") for d in under):
        return ["%s=%s is outside the directories this role owns: it must be%s"
                % (knob, _show(value), where)]
    if suffix and not value.endswith(suffix):
        return ["%s=%s must end in %s" % (knob, _show(value), suffix)]
    return []


def check_paths(knob, value, under=(), suffix=""):
    return _each(knob, value, "absolute paths", check_path, under=under, suffix=suffix)


def check_source(knob, value, allow_http=False, optional=False, http_knob=""):
    if optional and value == "":
        return []
    if isinstance(value, str) and "://" in value:
        return check_url(knob, value, allow_http, False, http_knob)
    return check_path(knob, value, (), "", False, plain=False)


def check_filename(knob, value, suffix=""):
    errors = _text(knob, value, allow_empty=False)
    if errors:
        return errors
    if not _FILENAME.match(value) or value in (".", ".."):
        return ["%s=%s must be one file name (letters, digits, . _ @ + -; no '/')" % (knob, _show(value))]
    if suffix and not value.endswith(suffix):
        return ["%s=%s must end in %s" % (knob, _show(value), suffix)]
    return []


def check_unit(knob, value, suffixes=UNIT_SUFFIXES):
    errors = _text(knob, value, allow_empty=False)
    if errors:
        return errors
    allowed = "a systemd unit name: letters, digits, ':_.\\-@', at most 255 characters, ending in one of %s" % (
        " ".join(suffixes))
    if len(value) > 255 or not _UNIT_CHARS.match(value):
        return ["%s=%s is not %s" % (knob, _show(value), allowed)]
    stem = next((value[:-len(s)] for s in suffixes if value.endswith(s)), None)
    if not stem or stem.startswith("@") or stem.count("@") > 1:
        return ["%s=%s is not %s" % (knob, _show(value), allowed)]
    return []


def check_units(knob, value, suffixes=UNIT_SUFFIXES):
    return _each(knob, value, "systemd unit names", check_unit, suffixes=suffixes)


def check_url(knob, value, allow_http=False, optional=False, http_knob=""):
    if optional and value == "":
        return []
    errors = _text(knob, value, allow_empty=False)
    if errors:
        return errors
    if re.search(r"\s", value):
        return ["%s=%s must not contain blanks" % (knob, _show(value))]
    if value.startswith("https://") or value.startswith("file:///"):
        return []
    if value.startswith("http://"):
        if allow_http:
            return []
        return ["%s=%s is plain http: use https:// or file:///, or set %s: true for an internal mirror"
                % (knob, _show(value), http_knob or "the role's *_allow_insecure_http")]
    return ["%s=%s must be an https:// or file:/// URL%s"
            % (knob, _show(value), (" (http:// with %s: true)" % http_knob) if http_knob else "")]


def check_repo_component(knob, value, optional=False):
    if optional and value == "":
        return []
    errors = _text(knob, value, allow_empty=False)
    if errors:
        return errors
    if not _REPO_COMPONENT.match(value) or ".." in value:
        return ["%s=%s must be one directory name of the repository (letters, digits, . _ + -; e.g. ubuntu24.04)"
                % (knob, _show(value))]
    return []


def check_repo_components(knob, value):
    return _each(knob, value, "repository directory names or ids", check_repo_component)


def check_argv(knob, value, minimum=0):
    errors = _list(knob, value, "strings (argv: the command and its arguments, one item each)")
    if errors:
        return errors
    if len(value) < minimum:
        return ["%s must list at least %d item(s), got %s" % (knob, minimum, _show(value))]
    found = []
    for index, item in enumerate(value):
        if not isinstance(item, str):
            found.append("%s[%d]=%s must be a string" % (knob, index, _show(item)))
        elif "\x00" in item or "\n" in item or "\r" in item:
            found.append("%s[%d]=%s contains a NUL, newline or carriage return" % (knob, index, _show(item)))
    if value and isinstance(value[0], str) and not value[0]:
        found.append("%s[0] (the command) must not be empty" % knob)
    return found


def check_packages(knob, value):
    errors = _list(knob, value, "package names")
    if errors:
        return errors
    bad = [item for item in value if not isinstance(item, str) or not _PACKAGE.match(item)]
    if bad:
        return ["%s: %s are not package names (letters, digits, + . _ -, starting with a letter or digit)"
                % (knob, _show(bad))]
    return []


def check_timeout(knob, value, minimum=1, maximum=None):
    if isinstance(value, str) and re.match(r"^-?[0-9]+\Z", value.strip()):
        value = int(value)              # "600" from --extra-vars key=value, as argument validation converts it
    if not _is_int(value):
        return ["%s=%s must be a whole number of seconds" % (knob, _show(value))]
    if value < minimum or (maximum is not None and value > maximum):
        upper = (" to %d" % maximum) if maximum is not None else " or more"
        return ["%s=%s must be %d%s seconds" % (knob, _show(value), minimum, upper)]
    return []


def check_texts(knob, value, allow_tab=False):
    return _each(knob, value, "strings", _text, allow_tab=allow_tab)


def check_fingerprints(knob, value):
    errors = _list(knob, value, "OpenPGP fingerprints")
    if errors:
        return errors
    if not value:
        return ["%s must list at least one OpenPGP fingerprint (40 hex digits) of the repository's signing key" % knob]
    bad = [item for item in value if not isinstance(item, str) or not _FINGERPRINT.match(item.replace(" ", ""))]
    if bad:
        return ["%s: %s are not full OpenPGP fingerprints (40 hex digits for v4 keys, 64 for v6; short or long "
                "key ids are not enough)" % (knob, _show(bad))]
    return []


def check_kernel_release(knob, value, optional=False):
    if optional and value == "":
        return []
    problem = release_problem(value)
    if problem:
        return ["%s=%s is not a kernel release as uname -r prints it (e.g. 6.1.0-50-amd64, "
                "5.14.0-427.13.1.el9_4.x86_64): %s" % (knob, _show(value), problem)]
    return []


def check_kernel_releases(knob, value):
    return _each(knob, value, "kernel releases (uname -r)", check_kernel_release)


def check_package_version(knob, value):
    if value in ("", {}):
        return []
    if isinstance(value, dict):
        found = []
        for name in sorted(value, key=str):
            if not isinstance(name, str) or not _PACKAGE.match(name):
                found.append("%s: %s is not a package name (letters, digits, + . _ -, starting with a letter or digit)"
                             % (knob, _show(name)))
                continue
            problem = package_version_problem(value[name])
            if problem:
                found.append("%s[%s]=%s is not a package version such as 6.1.192-2 or 5.14.0-427.13.1.el9_4: %s"
                             % (knob, name, _show(value[name]), problem))
        return found
    if not isinstance(value, str):
        return ["%s=%s must be a package version or a mapping package: version, not a %s"
                % (knob, _show(value), type(value).__name__)]
    problem = package_version_problem(value)
    if problem:
        return ["%s=%s is not a package version such as 6.1.192-2 or 5.14.0-427.13.1.el9_4 (apt-cache policy, "
                "dnf list --showduplicates): %s" % (knob, _show(value), problem)]
    return []


def check(rule):
    """Messages for one rule dict (see the module docstring); raises ValueError on a malformed rule.

    A rule's ``hint`` is appended to each of its messages (what to do about it).
    """
    if not isinstance(rule, dict) or "knob" not in rule or "rule" not in rule or "value" not in rule:
        raise ValueError("an input rule needs knob, value and rule; got %r" % (rule,))
    found = _check(rule)
    if found and rule.get("hint"):
        found = ["%s (%s)" % (message, rule["hint"]) for message in found]
    return found


def _check(rule):
    knob, value, kind = rule["knob"], rule["value"], rule["rule"]
    if kind == "path":
        return check_path(knob, value, rule.get("under", ()), rule.get("suffix", ""), rule.get("optional", False),
                          rule.get("plain", True))
    if kind == "paths":
        return check_paths(knob, value, rule.get("under", ()), rule.get("suffix", ""))
    if kind == "source":
        return check_source(knob, value, bool(rule.get("allow_http", False)), rule.get("optional", False),
                            rule.get("http_knob", ""))
    if kind == "filename":
        return check_filename(knob, value, rule.get("suffix", ""))
    if kind == "unit":
        return check_unit(knob, value, tuple(rule.get("suffixes", UNIT_SUFFIXES)))
    if kind == "units":
        return check_units(knob, value, tuple(rule.get("suffixes", UNIT_SUFFIXES)))
    if kind == "url":
        return check_url(knob, value, bool(rule.get("allow_http", False)), rule.get("optional", False),
                         rule.get("http_knob", ""))
    if kind == "repo_component":
        return check_repo_component(knob, value, rule.get("optional", False))
    if kind == "repo_components":
        return check_repo_components(knob, value)
    if kind == "argv":
        return check_argv(knob, value, int(rule.get("min", 0)))
    if kind == "packages":
        return check_packages(knob, value)
    if kind == "timeout":
        return check_timeout(knob, value, int(rule.get("min", 1)), rule.get("max"))
    if kind == "text":
        return _text(knob, value, allow_tab=rule.get("allow_tab", False))
    if kind == "texts":
        return check_texts(knob, value, rule.get("allow_tab", False))
    if kind == "fingerprints":
        return check_fingerprints(knob, value)
    if kind == "kernel_release":
        return check_kernel_release(knob, value, rule.get("optional", False))
    if kind == "kernel_releases":
        return check_kernel_releases(knob, value)
    if kind == "package_version":
        return check_package_version(knob, value)
    raise ValueError("unknown input rule %r for %s (known: %s)" % (kind, knob, ", ".join(RULE_KINDS)))


def errors(rules):
    """All messages for a list of rule dicts."""
    found = []
    for rule in rules:
        found.extend(check(rule))
    return found

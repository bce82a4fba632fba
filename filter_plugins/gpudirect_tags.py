"""Which install stages of site.yml a run limited by --tags / --skip-tags leaves out.

``ansible_run_tags | gpudirect_tags_left_out(ansible_skip_tags)``
    The stages (``os_pin``, ``drivers``, ``pcie_acs``, ``verify``: the ones a
    converged-state record stands for) whose site.yml tag the run's tags do not
    select, in that order, by Ansible's rules for a task that carries the one tag
    (``all``, ``tagged`` and ``untagged`` as Ansible reads them). Empty for a run with
    neither option, or with only tags no stage carries (molecule's
    ``--skip-tags molecule-notest,notest``).

site.yml tags each stage's import with the stage's name (tests/unit/test_site_tags.py
keeps the two in step); playbooks/tasks/record.yml and roles/gpudirect_state write no
record when this list is not empty, and the run says so at its start.
"""

from ansible.errors import AnsibleFilterError

STAGES = ("os_pin", "drivers", "pcie_acs", "verify")


def _tags(value, what):
    if value is None:
        return set()
    if isinstance(value, str) or not all(isinstance(t, str) for t in value):
        raise AnsibleFilterError("gpudirect_tags_left_out: %s must be a list of tag names (ansible_run_tags, "
                                 "ansible_skip_tags), got %r" % (what, value))
    return set(value)


def gpudirect_tags_left_out(run_tags, skip_tags=None):
    only = _tags(run_tags, "the run tags") or {"all"}
    skip = _tags(skip_tags, "the skip tags")
    left = []
    for stage in STAGES:
        runs = bool(only & {"all", "tagged", stage})
        if skip & {"all", "tagged", stage}:
            runs = False
        if not runs:
            left.append(stage)
    return left


class FilterModule:
    """gpudirect_tags_left_out: the install stages a tagged run leaves out."""

    def filters(self):
        return {"gpudirect_tags_left_out": gpudirect_tags_left_out}

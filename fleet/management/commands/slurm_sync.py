"""Import or sync a cluster's hosts (names, GPU counts, GPU type) from Slurm's ``sinfo --json``.

    manage.py slurm_sync CLUSTER [--slurm-conf PATH] [--partition NAME] [--create]

Re-running it never duplicates a host: known hosts get their GPU count updated, hosts Slurm
no longer has are listed (never deleted: they keep their history). ``--slurm-conf`` and
``--partition`` are saved in the cluster's backend configuration, and the cluster is switched
to the Slurm backend: when it ran on another backend, its hosts the partition does not have
retire (a host event says why; nothing is scheduled on them, no capacity counts them).
``--create`` creates the cluster when it does not exist yet.
"""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from fleet.backends.base import BackendUnavailable
from fleet.backends.slurm import SlurmFleet
from fleet.models import Cluster
from fleet.services import switch_backend


class Command(BaseCommand):
    help = "Import or sync a cluster's hosts and GPU counts from Slurm (sinfo --json)."

    def add_arguments(self, parser):
        parser.add_argument("cluster", help="Timeshare cluster name")
        parser.add_argument("--slurm-conf", help="path of slurm.conf (saved on the cluster)")
        parser.add_argument("--partition", help="the partition Timeshare owns (saved)")
        parser.add_argument("--create", action="store_true", help="create the cluster if needed")

    def handle(self, *args, cluster, slurm_conf=None, partition=None, create=False, **options):
        with transaction.atomic():
            found = Cluster.objects.select_for_update().filter(name=cluster).first()
            if found is None:
                if not create:
                    raise CommandError(f"no cluster {cluster!r} (use --create to create it)")
                found = Cluster(name=cluster, gpu_type="", backend="slurm", backend_config={})
            config = dict(found.backend_config or {})
            switched = found.backend != "slurm" and found.pk is not None
            if switched:
                self.stdout.write(f"cluster {cluster}: backend {found.backend} -> slurm")
            found.backend = "slurm"
            if slurm_conf:
                config["slurm_conf"] = slurm_conf
            if partition:
                config["partition"] = partition
            found.backend_config = config
            fleet = SlurmFleet(found)
            try:
                fleet.check()
            except BackendUnavailable as error:
                raise CommandError(str(error)) from None
            if found.pk is None:
                found.gpu_type = "GPU"
                found.save()
                fleet.cluster = found
            if switched:
                retired = switch_backend(found, "slurm", fleet.known_hosts())
                if retired:
                    self.stdout.write(f"retired (not in partition {fleet.partition}): "
                                      + " ".join(retired))
            result = fleet.sync_hosts()
            if result.gpu_type and (not found.gpu_type or found.gpu_type == "GPU"):
                found.gpu_type = result.gpu_type.upper()
            found.save()
        self.stdout.write(
            f"cluster {found.name} (partition {fleet.partition}): {result.summary()}"
        )

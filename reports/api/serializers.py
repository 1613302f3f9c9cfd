"""The review report's figures as JSON."""

from rest_framework import serializers


class UsageRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    path = serializers.CharField()
    name = serializers.CharField()
    depth = serializers.IntegerField()
    leaf = serializers.BooleanField()
    shares = serializers.FloatField(allow_null=True, help_text="Time-weighted shares.")
    percent_of_cluster = serializers.FloatField()
    entitlement_gpu_hours = serializers.FloatField()
    delivered_gpu_hours = serializers.FloatField()
    unallocated_gpu_hours = serializers.FloatField()
    demand_gpu_hours = serializers.FloatField()
    attainment = serializers.FloatField(allow_null=True)
    wait_median_seconds = serializers.FloatField(allow_null=True)
    wait_p95_seconds = serializers.FloatField(allow_null=True)
    starts = serializers.IntegerField()
    preemptions = serializers.IntegerField()
    lost_gpu_hours = serializers.FloatField()
    utilization = serializers.FloatField(
        allow_null=True, help_text="GPU busy fraction (0-1) of the budget's runs; null without "
        "telemetry",
    )


class UsageSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    period = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    until = serializers.DateTimeField(help_text="End of the elapsed part of the period.")
    capacity_gpu_hours = serializers.FloatField()
    definitions = serializers.DictField(child=serializers.CharField())
    rows = UsageRowSerializer(many=True)

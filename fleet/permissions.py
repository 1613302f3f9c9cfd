"""Who may operate the fleet: superusers and holders of ``fleet.operate_fleet`` (the
operators' group). Who may read the fleet pages needs the budget tree and is the
scheduler's rule (``scheduler.permissions.can_view_fleet``)."""

OPERATE_FLEET = "fleet.operate_fleet"


def can_operate(user) -> bool:
    return bool(user.is_authenticated and (user.is_superuser or user.has_perm(OPERATE_FLEET)))

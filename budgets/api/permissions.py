"""The DRF permission every app's API shares: a role in the organisation."""

from budgets.permissions import can_follow_reviews, has_role
from common.api.permissions import permission_for

HasRole = permission_for(has_role, "You have no role in this organisation.", name="HasRole")
FollowsReviews = permission_for(
    can_follow_reviews, "Budget reviews are followed by managers and reviewers.",
    name="FollowsReviews",
)

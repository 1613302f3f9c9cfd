from django.urls import path

from reports import views

app_name = "reports"

urlpatterns = [
    path("", views.review, name="review_default"),
    path("review/<slug:cluster>/", views.review, name="review"),
    path("review/<slug:cluster>/trends/", views.review_trends, name="review_trends"),
    path("review/<slug:cluster>/report.csv", views.review, {"fmt": "csv"}, name="review_csv"),
    path("review/<slug:cluster>/nodes/<int:pk>/", views.review, name="node_review"),
    path(
        "review/<slug:cluster>/nodes/<int:pk>/report.csv", views.review, {"fmt": "csv"},
        name="node_review_csv",
    ),
    path("dashboards/", views.dashboards, name="dashboards"),
    path("idle/", views.idle, name="idle"),
    path("preferences/", views.preferences, name="preferences"),
    path("dashboards/<slug:cluster>/", views.cluster_dashboard, name="cluster"),
    path("what-if/", views.what_if, name="what_if_default"),
    path("what-if/<slug:cluster>/", views.what_if, name="what_if"),
    path("what-ifs/<int:pk>/", views.what_if_detail, name="what_if_detail"),
    path("what-if/<slug:cluster>/compare/", views.what_if_compare, name="what_if_compare"),
    path("what-if-comparisons/<int:pk>/", views.what_if_comparison,
         name="what_if_comparison"),
]

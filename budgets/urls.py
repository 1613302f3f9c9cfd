from django.urls import path

from budgets import views

app_name = "budgets"

urlpatterns = [
    path("", views.tree, name="tree_default"),
    path("clusters/<slug:cluster>/", views.tree, name="tree"),
    path("nodes/<int:pk>/", views.node_detail, name="node"),
    path("nodes/<int:pk>/history/", views.node_history, name="node_history"),
    path("nodes/<int:pk>/move/", views.node_move, name="node_move"),
    path("nodes/<int:pk>/children/new/", views.node_add_child, name="node_add_child"),
    path("nodes/<int:pk>/requests/new/", views.request_create, name="request_create"),
    path("nodes/<int:pk>/people/add/", views.node_people_add, name="node_people_add"),
    path("nodes/<int:pk>/people/remove/", views.node_people_remove, name="node_people_remove"),
    path("people/search/", views.people_search, name="people_search"),
    path("history/", views.history, name="history"),
    path("requests/", views.request_list, name="requests"),
    path("requests/<int:pk>/", views.request_detail, name="request"),
    path("requests/<int:pk>/withdraw/", views.request_withdraw, name="request_withdraw"),
    path("requests/<int:pk>/comment/", views.request_comment, name="request_comment"),
    path("reviews/", views.review_list, name="reviews"),
    path("reviews/<int:pk>/", views.review_detail, name="review"),
    path("reviews/items/<int:pk>/decide/", views.review_item_decide, name="review_item_decide"),
    path("requests/<int:pk>/pass-up/", views.request_pass_up, name="request_pass_up"),
]

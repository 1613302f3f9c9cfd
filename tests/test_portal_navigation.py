"""The navigation links only to pages the persona may open, and every one of them opens."""

import re

import pytest
from django.urls import reverse

ALL = ["Home", "Budgets", "Requests", "History", "Reviews", "Reports", "Dashboards", "What-if",
       "Workloads", "Hosts"]


def navigation(html: str) -> dict[str, str]:
    nav = re.search(r"<nav>(.*?)</nav>", html, re.S).group(1)
    return {re.sub(r"<.*?>|\s+\d+$", "", text).strip(): href
            for href, text in re.findall(r'<a href="([^"]+)">(.*?)</a>', nav, re.S)}


@pytest.mark.parametrize(
    ("persona", "links"),
    [
        ("ceo", ALL),
        ("pi", ALL),
        ("lead", ALL),  # manages project A1: what-ifs of its subtree
        ("researcher", [n for n in ALL if n not in ("Reviews", "What-if")]),
        # no budget of theirs
        ("operator", [n for n in ALL if n not in ("Reviews", "Reports", "What-if")]),
        ("outsider", ["Home", "Workloads"]),
    ],
)
def test_the_navigation_shows_what_the_persona_may_open(org, client_for, persona, links):
    client = client_for(persona)
    found = navigation(client.get(reverse("home")).content.decode())
    assert list(found) == links
    for name, href in found.items():
        assert client.get(href, follow=True).status_code == 200, name


@pytest.mark.parametrize("persona", ["ceo", "researcher", "operator", "outsider"])
def test_the_user_menu_links_to_the_api_tokens_page(org, client_for, persona):
    client = client_for(persona)
    html = client.get(reverse("home")).content.decode()
    menu = re.search(r'<form class="logout".*?</form>', html, re.S).group(0)
    (href,) = re.findall(r'<a href="([^"]+)">API tokens</a>', menu)
    assert client.get(href).status_code == 200

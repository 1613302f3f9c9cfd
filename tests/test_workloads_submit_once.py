"""The submit form carries a one-time token: a double click or a resent POST queues the
workload once and lands on it; a refused submission does not use the token up."""

from django.urls import reverse
from fixtures_scheduler import form_data

from scheduler.models import Workload

NEW = reverse("scheduler:workload_create")


def test_the_same_form_sent_twice_queues_one_workload(fleet, client_for):
    data = form_data(fleet, name="twice")
    first = client_for("researcher").post(NEW, data)
    again = client_for("researcher").post(NEW, data)
    workload = Workload.objects.get(name="twice")
    assert first.status_code == again.status_code == 302
    assert again["Location"] == first["Location"] == reverse(
        "scheduler:workload", kwargs={"pk": workload.pk}
    )


def test_a_resent_form_says_it_was_already_submitted(fleet, client_for):
    data = form_data(fleet, name="twice")
    client_for("researcher").post(NEW, data)
    page = client_for("researcher").post(NEW, data, follow=True)
    assert "This form was already submitted: here is its workload." in page.content.decode()


def test_a_refused_form_can_be_corrected_and_sent_with_the_same_token(fleet, client_for):
    refused = client_for("researcher").post(NEW, form_data(fleet, name="fixed", gpus="11"))
    token = refused.context["form"]["submit_token"].value()
    fixed = client_for("researcher").post(
        NEW, form_data(fleet, name="fixed", submit_token=token)
    )
    assert (refused.status_code, fixed.status_code) == (422, 302)
    assert Workload.objects.filter(name="fixed").count() == 1


def test_two_forms_are_two_workloads(fleet, client_for):
    for _ in range(2):
        client_for("researcher").post(NEW, form_data(fleet, name="two"))
    assert Workload.objects.filter(name="two").count() == 2


def test_a_form_without_its_token_is_refused(fleet, client_for, nothing_written):
    with nothing_written():
        response = client_for("researcher").post(NEW, form_data(fleet, submit_token=None))
    assert response.status_code == 422
    assert response.context["form"].errors["submit_token"] == [
        "This form is out of date: reload the page and submit again."
    ]


def test_each_page_gets_a_new_token(fleet, client_for):
    tokens = {client_for("researcher").get(NEW).context["form"]["submit_token"].value()
              for _ in range(2)}
    assert len(tokens) == 2

"""The dataset page's synthetic-cases card (labeling's template, judges' form: labeling never imports judges)."""

from django import template

from judges.synthetic.forms import SynthesisForm
from judges.synthetic.selectors import dataset_synthesis_jobs

register = template.Library()


@register.inclusion_tag("judges/synthetic/_card.html")
def synthesis_card(dataset) -> dict:
    # An inclusion tag's context holds only what it returns: the links need the dataset's project.
    return {"dataset": dataset, "project": dataset.project, "form": SynthesisForm(dataset=dataset),
            "jobs": dataset_synthesis_jobs(dataset=dataset)}

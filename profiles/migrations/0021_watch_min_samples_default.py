"""A watch's default minimum falls from 1,000 to 300 step-thread samples a side, half of
what a default capture (30 s at 20 Hz) holds: at 1,000 no default capture was ever judged.
Watches left at the old default take the new one; a minimum someone chose stays."""

import django.core.validators
from django.db import migrations, models

OLD_DEFAULT, NEW_DEFAULT = 1000, 300


def forwards(apps, schema_editor):
    Watch = apps.get_model("profiles", "Watch")
    Watch.objects.filter(min_samples=OLD_DEFAULT).update(min_samples=NEW_DEFAULT)


def backwards(apps, schema_editor):
    Watch = apps.get_model("profiles", "Watch")
    Watch.objects.filter(min_samples=NEW_DEFAULT).update(min_samples=OLD_DEFAULT)


class Migration(migrations.Migration):
    dependencies = [
        ("profiles", "0020_capture_time_file"),
    ]

    operations = [
        migrations.AlterField(
            model_name="watch",
            name="min_samples",
            field=models.PositiveIntegerField(
                default=NEW_DEFAULT,
                validators=[
                    django.core.validators.MinValueValidator(100),
                    django.core.validators.MaxValueValidator(10000000),
                ],
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]

"""Log into the admin as a superuser and print what the runs page and an add attempt return."""

import os

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_site.settings")
    django.setup()
    from django.contrib.auth.models import User  # noqa: PLC0415 - after setup()
    from django.core.management import call_command  # noqa: PLC0415
    from django.test import Client  # noqa: PLC0415

    call_command("migrate", verbosity=0)
    user = User.objects.create_superuser("admin", "admin@example.invalid", "pw")
    client = Client()
    client.force_login(user)
    page = client.get("/admin/firefly_scheduling/run/")
    print("LIST", page.status_code)
    print(page.content.decode())
    print("ADD", client.get("/admin/firefly_scheduling/run/add/").status_code)
    print("INDEX", client.get("/admin/").content.decode().count("/admin/firefly_scheduling/run/"))


if __name__ == "__main__":
    main()
